package containerfile

import (
	"strings"
	"testing"

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

// TestKernelTypePackages is issue 26.2: each kernel type installs the
// packages OpenShift's on-cluster layering installs for it, in place of
// the default kernel's, and the default kernel type installs nothing.
func TestKernelTypePackages(t *testing.T) {
	const remove = "RUN dnf -y remove kernel kernel-core kernel-modules kernel-modules-core kernel-modules-extra && \\\n"
	tests := []struct {
		kernelType v1alpha1.KernelType
		install    string
	}{
		{v1alpha1.KernelTypeRealtime, "\tdnf -y install kernel-rt-core kernel-rt-modules kernel-rt-modules-extra kernel-rt-kvm && \\\n\tdnf clean all\n"},
		{v1alpha1.KernelType64kPages, "\tdnf -y install kernel-64k-core kernel-64k-modules kernel-64k-modules-core kernel-64k-modules-extra && \\\n\tdnf clean all\n"},
		{v1alpha1.KernelTypeDefault, ""},
		{"", ""},
	}
	for _, tc := range tests {
		res, err := Render(Input{ConfigName: "rendered-worker-1", Pool: "worker", Arch: "arm64", BaseImage: testBase,
			Spec: &v1alpha1.MachineConfigSpec{KernelType: tc.kernelType}})
		if err != nil {
			t.Fatalf("%q: %v", tc.kernelType, err)
		}
		cf := string(res.Containerfile)
		if tc.install == "" {
			if strings.Contains(cf, "dnf") {
				t.Errorf("%q: the default kernel needs no package step:\n%s", tc.kernelType, cf)
			}
			continue
		}
		if !strings.Contains(cf, remove+tc.install) {
			t.Errorf("%q: Containerfile has no step\n%s%s\ngot:\n%s", tc.kernelType, remove, tc.install, cf)
		}
	}
}
