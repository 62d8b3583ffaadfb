package buildinputs

import (
	"strings"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// The hash names builds: a change to it renames every build, so that no
// build of the same inputs is found again and every pool rebuilds. It is
// pinned here.
func TestHashIsStable(t *testing.T) {
	spec := &v1alpha1.MachineOSConfigSpec{RenderedImagePushSpec: "registry.example/os/worker:latest"}
	got := Hash("render-hash", spec, "registry.example/builder@sha256:"+strings.Repeat("b", 64))
	const want = "1b6ce393bcb5b67be0e67a61a3a2b878d659eb1f1c5ebb24c30f6fe0ee30533a"
	if got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
	// The default strategy is ConfigLayer, named or not.
	spec.ImageBuilder.Strategy = v1alpha1.ConfigLayerStrategy
	if again := Hash("render-hash", spec, "registry.example/builder@sha256:"+strings.Repeat("b", 64)); again != got {
		t.Errorf("Hash with the default strategy named = %s, want %s", again, got)
	}
	spec.ImageBuilder.Strategy = v1alpha1.SingleJobStrategy
	if other := Hash("render-hash", spec, "registry.example/builder@sha256:"+strings.Repeat("b", 64)); other == got {
		t.Error("Hash does not cover the strategy")
	}
}

func TestNames(t *testing.T) {
	mosc := &v1alpha1.MachineOSConfig{}
	mosc.Name = "worker"
	mosc.Spec.RenderedImagePushSpec = "127.0.0.1:5000/os/worker:latest"
	hash := strings.Repeat("0123456789abcdef", 4)
	if got := BuildName(mosc, hash); got != "worker-0123456789abcdef" {
		t.Errorf("BuildName = %s", got)
	}
	if got := PushSpec(mosc, "worker-0123456789abcdef"); got != "127.0.0.1:5000/os/worker:worker-0123456789abcdef" {
		t.Errorf("PushSpec = %s", got)
	}
	for spec, want := range map[string]string{
		"127.0.0.1:5000/os/worker:latest": "127.0.0.1:5000/os/worker",
		"127.0.0.1:5000/os/worker":        "127.0.0.1:5000/os/worker",
		"os/worker:1":                     "os/worker",
	} {
		if got := Repository(spec); got != want {
			t.Errorf("Repository(%s) = %s, want %s", spec, got, want)
		}
	}
}
