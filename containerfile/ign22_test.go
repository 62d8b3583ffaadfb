package containerfile

import (
	"strings"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testconfigs"
)

// ignitionCorpus is the model's corpus of real Ignition 2.2 MachineConfigs.
const ignitionCorpus = "../nodeconfig/testdata/ignition-corpus/"

// loadMachineConfig reads a MachineConfig manifest.
func loadMachineConfig(t testing.TB, path string) v1alpha1.MachineConfig {
	t.Helper()
	mc, err := testconfigs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// TestIgnition2CorpusRenders renders the Ignition 2.2 MachineConfigs of
// the corpus, whose translation nodeconfig's TestIgnition2Corpus pins.
// rendered lists lines the render's dump must have.
func TestIgnition2CorpusRenders(t *testing.T) {
	tests := []struct {
		file     string
		rendered []string
	}{
		{
			file: "02-mco-server-test-config-ign22.yaml",
			rendered: []string{
				"0 -rw-r--r-- 0:0 etc/coreos/update.conf mtime=0 size=53",
				"0 -rw-r--r-- 0:0 etc/systemd/system/docker.service.d/10-dockeropts.conf",
				"2 -rwxrwxrwx 0:0 etc/systemd/system/locksmith.service mtime=0 -> /dev/null",
				"2 -rwxrwxrwx 0:0 etc/systemd/system/multi-user.target.wants/etcd-member.service mtime=0 -> /etc/systemd/system/etcd-member.service",
				"2 -rwxrwxrwx 0:0 etc/systemd/system/multi-user.target.wants/kubelet.service mtime=0 -> /etc/systemd/system/kubelet.service",
			},
		},
		{
			file:     "06-mco-doc-99-worker-ssh-ign22.yaml",
			rendered: []string{`"userName": "core"`, `"ssh-ed25519 XYZ7890...."`},
		},
		{
			file:     "14-cnf-disable-chronyd-ign22.yaml",
			rendered: []string{"0 -rw-r--r-- 0:0 etc/systemd/system/chronyd.service mtime=0 size="},
		},
		{
			file: "19-telco-sctp-worker-ign22.yaml",
			rendered: []string{
				"0 -rw-r--r-- 0:0 etc/modprobe.d/sctp-blacklist.conf mtime=0 size=0",
				"0 -rw-r--r-- 0:0 etc/modules-load.d/sctp-load.conf mtime=0 size=4",
			},
		},
		{
			file: "31-sap-75-worker-sdi-ign22.yaml",
			rendered: []string{
				"0 -rw-r--r-- 0:0 etc/modules-load.d/sdi-dependencies.conf mtime=0 size=",
				"2 -rwxrwxrwx 0:0 etc/systemd/system/multi-user.target.wants/sdi-modules-load.service mtime=0 -> /etc/systemd/system/sdi-modules-load.service",
			},
		},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".yaml"), func(t *testing.T) {
			mc := loadMachineConfig(t, ignitionCorpus+tt.file)
			res, err := Render(Input{ConfigName: "rendered-worker-1", Pool: "worker", Arch: "amd64", BaseImage: testBase, Spec: &mc.Spec})
			if err != nil {
				t.Fatal(err)
			}
			got := string(dump(t, res))
			for _, line := range tt.rendered {
				if !strings.Contains(got, line) {
					t.Errorf("render has no %q:\n%s", line, got)
				}
			}
		})
	}
}
