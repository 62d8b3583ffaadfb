package machineconfig

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/nodeconfig"
)

// TestMergedKernelArgumentsAreCapped: issue 20 point 7. Two
// MachineConfigs whose kernel arguments each fit the command line, and
// together do not, are refused by the merge, naming each with what it
// adds (an argument both bring counts once, for the first); a
// MachineConfig without kernel arguments is not named.
func TestMergedKernelArgumentsAreCapped(t *testing.T) {
	long := func(c byte) string { return "x=" + strings.Repeat(string(c), 597) } // 600 bytes with its space
	a := mc("00-a", `{"ignition":{"version":"3.5.0"}}`)
	a.Spec.KernelArguments = []string{long('a'), "quiet"}
	b := mc("10-b", `{"ignition":{"version":"3.5.0"},"kernelArguments":{"shouldExist":["quiet","`+long('b')+`"]}}`)
	c := mc("20-c", `{"ignition":{"version":"3.5.0"}}`)
	configs := []v1alpha1.MachineConfig{c, b, a}
	for i := range configs {
		if errs := nodeconfig.ValidateMachineConfigSpec(&configs[i].Spec, field.NewPath("spec")); len(errs) > 0 {
			t.Fatalf("setup: %s alone is invalid: %v", configs[i].Name, errs)
		}
	}
	_, _, err := MergeIgnition(configs)
	var tooLong *KernelArgumentsTooLongError
	if !errors.As(err, &tooLong) {
		t.Fatalf("merge: %v, want a *KernelArgumentsTooLongError", err)
	}
	want := []KernelArgumentsSource{{Name: "00-a", Bytes: 606}, {Name: "10-b", Bytes: 600}}
	if len(tooLong.Sources) != 2 || tooLong.Sources[0] != want[0] || tooLong.Sources[1] != want[1] || tooLong.Bytes != 1206 {
		t.Errorf("error %+v, want sources %+v and 1206 bytes", tooLong, want)
	}
	for _, s := range []string{"MachineConfigs 00-a (606 bytes), 10-b (600 bytes)", "spec.kernelArguments", "spec.config.kernelArguments.shouldExist", "more than the 1024 bytes"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}

	// Without the long argument of 10-b they fit.
	b = mc("10-b", `{"ignition":{"version":"3.5.0"},"kernelArguments":{"shouldExist":["quiet"]}}`)
	if _, _, err := MergeIgnition([]v1alpha1.MachineConfig{a, b, c}); err != nil {
		t.Errorf("merge of 606 bytes: %v", err)
	}
}
