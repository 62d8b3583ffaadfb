package nodeconfig

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// TestExtensionPackages pins every known extension to the packages the
// Machine Config Operator installs for it, so that a typo in the table
// fails here and not in a build.
func TestExtensionPackages(t *testing.T) {
	want := map[string][]string{
		"two-node-ha":          {"fence-agents-all", "pacemaker", "pcs"},
		"wasm":                 {"crun-wasm"},
		"ipsec":                {"NetworkManager-libreswan", "libreswan"},
		"usbguard":             {"usbguard"},
		"kerberos":             {"krb5-workstation", "libkadm5"},
		"kernel-devel":         {"kernel-devel", "kernel-headers"},
		"sandboxed-containers": {"kata-containers"},
		"sysstat":              {"sysstat"},
	}
	if len(extensionNames) != len(want) {
		t.Errorf("known extensions %q, want the %d of the table", extensionNames, len(want))
	}
	for name, pkgs := range want {
		p, errs := BuildPlan(&v1alpha1.MachineConfigSpec{Extensions: []string{name}}, field.NewPath("spec"))
		if len(errs) > 0 {
			t.Errorf("%s: %v", name, errs)
			continue
		}
		if !slices.Equal(p.Packages, pkgs) {
			t.Errorf("%s installs %q, want %q", name, p.Packages, pkgs)
		}
	}
	all := slices.Clone(extensionNames)
	slices.Reverse(all)
	all = slices.DeleteFunc(all, func(n string) bool { return n == "kernel-devel" })
	p, errs := BuildPlan(&v1alpha1.MachineConfigSpec{Extensions: all, KernelType: v1alpha1.KernelTypeRealtime}, field.NewPath("spec"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if !slices.IsSorted(p.Packages) || len(slices.Compact(slices.Clone(p.Packages))) != len(p.Packages) {
		t.Errorf("packages %q are not sorted and unique", p.Packages)
	}
}

// TestExtensionsRefused: a package name or an unknown extension is refused
// at render time with the list of the known names, on the entry's own
// field; kernel-devel is refused with a non-default kernel, as OpenShift
// does.
func TestExtensionsRefused(t *testing.T) {
	const known = `supported values: "ipsec", "kerberos", "kernel-devel", "sandboxed-containers", "sysstat", "two-node-ha", "usbguard", "wasm"`
	tests := []struct {
		name string
		spec *v1alpha1.MachineConfigSpec
		want []string
	}{
		{name: "package names and unknown names",
			spec: &v1alpha1.MachineConfigSpec{Extensions: []string{"kata-containers", "ipsec", "wireguard-tools", "rm -rf /"}},
			want: []string{
				`spec.extensions[0]: Unsupported value: "kata-containers": ` + known,
				`spec.extensions[2]: Unsupported value: "wireguard-tools": ` + known,
				`spec.extensions[3]: Unsupported value: "rm -rf /": ` + known,
			}},
		{name: "duplicate", spec: &v1alpha1.MachineConfigSpec{Extensions: []string{"usbguard", "usbguard"}},
			want: []string{`spec.extensions[1]: Duplicate value: "usbguard"`}},
		{name: "kernel-devel with the realtime kernel",
			spec: &v1alpha1.MachineConfigSpec{Extensions: []string{"usbguard", "kernel-devel"}, KernelType: v1alpha1.KernelTypeRealtime},
			want: []string{`spec.extensions[1]: Forbidden: kernel-devel matches only the default kernel, not kernelType realtime`}},
		{name: "kernel-devel with 64k pages",
			spec: &v1alpha1.MachineConfigSpec{Extensions: []string{"kernel-devel"}, KernelType: v1alpha1.KernelType64kPages},
			want: []string{`spec.extensions[0]: Forbidden: kernel-devel matches only the default kernel, not kernelType 64k-pages`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := BuildPlan(tt.spec, field.NewPath("spec"))
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tt.want), errs)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to start with %q", i, errs[i].Error(), w)
				}
			}
		})
	}
	if errs := ValidateMachineConfigSpec(&v1alpha1.MachineConfigSpec{Extensions: []string{"kernel-devel"}, KernelType: v1alpha1.KernelTypeDefault}, field.NewPath("spec")); len(errs) > 0 {
		t.Errorf("kernel-devel with the default kernel: %v", errs)
	}
}
