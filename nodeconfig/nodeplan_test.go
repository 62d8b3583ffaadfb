package nodeconfig

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func TestSplitForNode(t *testing.T) {
	spec := &v1alpha1.MachineConfigSpec{
		Config: runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[
			{"path":"/etc/motd","contents":{"source":"data:,hi"}},
			{"path":"/var/lib/app/conf","mode":384,"contents":{"source":"data:,x"}}]},
			"systemd":{"units":[{"name":"a.service","contents":"[Service]\nExecStart=/bin/true\n"}]}}`)},
		KernelArguments: []string{"nosmt"},
	}
	s, err := SplitForNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.NodeItems) != 1 || s.NodeItems[0].Path != "/var/lib/app/conf" || *s.NodeItems[0].Mode != 0o600 {
		t.Errorf("node items: %+v", s.NodeItems)
	}
	want := []string{"1 files, directories or links outside /var", "1 systemd unit entries", "1 kernel arguments"}
	if len(s.ImageOnly) != len(want) {
		t.Fatalf("image only: %q, want %q", s.ImageOnly, want)
	}
	for i := range want {
		if s.ImageOnly[i] != want[i] {
			t.Errorf("image only[%d] = %q, want %q", i, s.ImageOnly[i], want[i])
		}
	}

	varOnly := &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/var/x","contents":{"source":"data:,x"}}]}}`)}}
	if s, err := SplitForNode(varOnly); err != nil || len(s.ImageOnly) != 0 || len(s.NodeItems) != 1 {
		t.Errorf("a /var-only config: %+v, %v", s, err)
	}
	if _, err := SplitForNode(&v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"9.9.9"}}`)}}); err == nil {
		t.Error("an invalid config was split")
	}
}
