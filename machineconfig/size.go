package machineconfig

import (
	"fmt"
	"strings"
)

// MaxRenderedSize bounds the JSON encoding of a rendered spec. The API
// server stores a MachineConfig in etcd, which refuses a write of more
// than 1.5 MiB by default (--max-request-bytes); the rest is left for the
// rendered config's metadata (the names of its sources, labels, managed
// fields). Every MachineConfig fits on its own, but the merge of many may
// not, and a Create that etcd refuses would fail the same way forever.
const MaxRenderedSize = 1536<<10 - 128<<10

// TooLargeError says that the merge of Sources does not fit in one
// MachineConfig: no retry can fix it, only smaller or fewer sources.
type TooLargeError struct {
	Sources []string
	// Size is the length of the merged spec's JSON encoding.
	Size int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the rendered config of MachineConfigs %s would be %d bytes (spec), more than the %d bytes a MachineConfig can hold (etcd refuses objects over 1.5 MiB): "+
		"move large files into the image (the MachineOSConfig's containerFile), compress them (contents.compression: gzip), or select fewer MachineConfigs",
		strings.Join(e.Sources, ", "), e.Size, MaxRenderedSize)
}
