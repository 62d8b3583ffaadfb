package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderRefusesKernelArgumentsThatBreakTheBoot: issue 20 point 7,
// through stratactl render. An argument that leaves the normal boot is
// named with its file line, MachineConfig and field; arguments that fit
// alone and not together name every MachineConfig that adds some.
func TestRenderRefusesKernelArgumentsThatBreakTheBoot(t *testing.T) {
	long := "x=" + strings.Repeat("a", 597)
	doc := func(name string, kargs ...string) string {
		return "apiVersion: machineconfiguration.strata.dev/v1alpha1\nkind: MachineConfig\nmetadata:\n  name: " + name +
			"\n  labels:\n    machineconfiguration.strata.dev/role: worker\nspec:\n  kernelArguments: [" + strings.Join(kargs, ", ") + "]\n"
	}
	dir := t.TempDir()
	breaks := filepath.Join(dir, "breaks.yaml")
	if err := os.WriteFile(breaks, []byte(doc("50-break", "quiet", "rd.break")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runRender(t, "-f", breaks, "--pool", "worker", "--base", base, "-o", t.TempDir())
	if want := breaks + `:8: MachineConfig 50-break: spec.kernelArguments[1]: Invalid value: "rd.break": must not take the node out of a normal boot`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want %q", err, want)
	}

	long2 := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(long2, []byte(doc("50-a", long)+"---\n"+doc("60-b", long+"b")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runRender(t, "-f", long2, "--pool", "worker", "--base", base, "-o", t.TempDir())
	if want := "MachineConfigs 50-a (600 bytes), 60-b (601 bytes) take 1201 bytes of the kernel command line"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want %q", err, want)
	}
}
