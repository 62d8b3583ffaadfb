package machineconfig

import (
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// TestMergeKernelType: a non-default kernel asked for by any MachineConfig
// is kept, as OpenShift's MergeMachineConfigs keeps it; between two
// non-default kernels the last in name order wins, as there.
func TestMergeKernelType(t *testing.T) {
	kt := func(k v1alpha1.KernelType) func(*v1alpha1.MachineConfigSpec) {
		return func(s *v1alpha1.MachineConfigSpec) { s.KernelType = k }
	}
	const (
		def  = v1alpha1.KernelTypeDefault
		rt   = v1alpha1.KernelTypeRealtime
		k64k = v1alpha1.KernelType64kPages
	)
	tests := []struct {
		name    string
		configs []v1alpha1.MachineConfig
		want    v1alpha1.KernelType
	}{
		// mco-real/repro/x1-kerneltype-default-later.
		{name: "default later does not undo realtime",
			configs: []v1alpha1.MachineConfig{mc("05-worker-realtime", "", kt(rt)), mc("50-worker-chrony", "", kt(def))}, want: rt},
		{name: "default later does not undo 64k-pages",
			configs: []v1alpha1.MachineConfig{mc("05-a", "", kt(k64k)), mc("50-b", "", kt(def))}, want: k64k},
		{name: "default earlier", configs: []v1alpha1.MachineConfig{mc("05-a", "", kt(def)), mc("50-b", "", kt(rt))}, want: rt},
		{name: "two non-default kernels: the last in name order",
			configs: []v1alpha1.MachineConfig{mc("50-b", "", kt(rt)), mc("05-a", "", kt(k64k))}, want: rt},
		{name: "two non-default kernels, other way round",
			configs: []v1alpha1.MachineConfig{mc("50-b", "", kt(k64k)), mc("05-a", "", kt(rt)), mc("60-c", "", kt(def))}, want: k64k},
		{name: "only default", configs: []v1alpha1.MachineConfig{mc("05-a", "", kt(def)), mc("50-b", "")}, want: def},
		{name: "none", configs: []v1alpha1.MachineConfig{mc("05-a", "")}, want: ""},
		// An unknown value is kept so that validation names it.
		{name: "unknown value", configs: []v1alpha1.MachineConfig{mc("05-a", "", kt("fancy")), mc("50-b", "", kt(def))}, want: "fancy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Merge(tt.configs)
			if err != nil {
				t.Fatal(err)
			}
			if got.KernelType != tt.want {
				t.Errorf("kernelType = %q, want %q", got.KernelType, tt.want)
			}
		})
	}
}
