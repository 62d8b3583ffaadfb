package containerfile

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// TestExtensionNamesBecomePackages is mco-real/repro/d3-extension-names:
// OpenShift extension names that are not package names must install the
// packages the Machine Config Operator installs for them, in one sorted,
// deduplicated dnf step whatever the order of the names.
func TestExtensionNamesBecomePackages(t *testing.T) {
	const want = "RUN dnf -y install 'NetworkManager-libreswan' 'fence-agents-all' 'kata-containers' 'krb5-workstation' 'libkadm5' 'libreswan' 'pacemaker' 'pcs' && \\\n\tdnf clean all\n"
	names := []string{"sandboxed-containers", "ipsec", "kerberos", "two-node-ha"}
	for _, order := range [][]string{names, {"two-node-ha", "kerberos", "ipsec", "sandboxed-containers"}} {
		res, err := Render(Input{ConfigName: "rendered-worker-1", Pool: "worker", Arch: "amd64", BaseImage: testBase,
			Spec: &v1alpha1.MachineConfigSpec{Extensions: order}})
		if err != nil {
			t.Fatalf("%q: %v", order, err)
		}
		if !strings.Contains(string(res.Containerfile), want) {
			t.Errorf("%q: Containerfile has no step\n%s\ngot:\n%s", order, want, res.Containerfile)
		}
	}
}

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
		p, errs := buildPlan(&v1alpha1.MachineConfigSpec{Extensions: []string{name}}, field.NewPath("spec"))
		if len(errs) > 0 {
			t.Errorf("%s: %v", name, errs)
			continue
		}
		if !slices.Equal(p.extensions, pkgs) {
			t.Errorf("%s installs %q, want %q", name, p.extensions, pkgs)
		}
	}
	all := slices.Clone(extensionNames)
	slices.Reverse(all)
	all = slices.DeleteFunc(all, func(n string) bool { return n == "kernel-devel" })
	p, errs := buildPlan(&v1alpha1.MachineConfigSpec{Extensions: all, KernelType: v1alpha1.KernelTypeRealtime}, field.NewPath("spec"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if !slices.IsSorted(p.extensions) || len(slices.Compact(slices.Clone(p.extensions))) != len(p.extensions) {
		t.Errorf("packages %q are not sorted and unique", p.extensions)
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
			_, err := Render(Input{ConfigName: "rendered-worker-1", Pool: "worker", Arch: "arm64", BaseImage: testBase, Spec: tt.spec})
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("error %v, want a *ValidationError", err)
			}
			if len(verr.Errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(verr.Errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(verr.Errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to start with %q", i, verr.Errs[i].Error(), w)
				}
			}
		})
	}
	if errs := ValidateMachineConfigSpec(&v1alpha1.MachineConfigSpec{Extensions: []string{"kernel-devel"}, KernelType: v1alpha1.KernelTypeDefault}, field.NewPath("spec")); len(errs) > 0 {
		t.Errorf("kernel-devel with the default kernel: %v", errs)
	}
}
