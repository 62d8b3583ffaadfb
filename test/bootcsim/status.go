package bootcsim

import "github.com/strata-dev/strata/rollout/bootc"

// The simulator writes its status with the daemon's own types
// (rollout/bootc), which encode the document as bootc 1.16 does, so that
// the two cannot drift. What keeps both honest to bootc is elsewhere:
// rollout/bootc parses fixtures of real bootc output, and the bootc-sim
// tests decode the simulator's output strictly against BOOTC.md and
// through the daemon's parser.

func newHost() *bootc.Host {
	return &bootc.Host{
		APIVersion: bootc.APIVersionV1,
		Kind:       bootc.Kind,
		Metadata:   bootc.Metadata{Name: bootc.HostName},
		Spec:       bootc.HostSpec{BootOrder: bootc.BootOrderDefault},
	}
}

func ptr[T any](v T) *T { return &v }
