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
