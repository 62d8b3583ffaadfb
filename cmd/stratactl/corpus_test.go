package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// corpusCase is one file of testdata/corpus: 40 real MachineConfigs from
// public repositories (line 1 of each names its source), converted to
// Strata's group and role label and otherwise as published.
// testdata/corpus-openshift holds the same files as published.
type corpusCase struct {
	file string
	// pool is the role the file's MachineConfigs are labelled for; ""
	// when they have none, so that only a pool selecting every
	// MachineConfig (testdata/pool-all.yaml) renders them.
	pool string
	// refused is a field path the refusal names; "" when the file
	// renders.
	refused string
}

// corpusCases are the outcomes once issue 12 is fixed; the comment on a
// row says why (the point numbers).
var corpusCases = []corpusCase{
	{"01-mco-bootstrap-99-worker-ssh.yaml", "worker", ""},
	{"02-mco-server-test-config-ign22.yaml", "", ""},                                         // 9: Ignition 2.2 translated (mask, filesystem)
	{"03-mco-doc-root-myfile.yaml", "", ""},                                                  // no role label: no pool of OpenShift's selects it either
	{"04-mco-doc-worker-kargs.yaml", "worker", ""},                                           //
	{"05-mco-doc-worker-extensions.yaml", "worker", ""},                                      // 3: usbguard is a known extension
	{"06-mco-doc-99-worker-ssh-ign22.yaml", "worker", ""},                                    // 9: Ignition 2.2 translated
	{"07-mco-doc-layering-osimageurl.yaml", "worker", ""},                                    //
	{"08-mco-ignsupport-files-attributes.yaml", "worker", ""},                                //
	{"09-mco-ignsupport-files-verify.yaml", "worker", ""},                                    //
	{"10-mco-ignsupport-sshd-disable.yaml", "worker", ""},                                    // 1: disabled
	{"11-mco-ignsupport-sshd-masked.yaml", "worker", "spec.config.systemd.units[0].masked"},  // 8: misspelt mask, the unit would stay unmasked
	{"12-mco-ignsupport-sshd-dropin.yaml", "worker", ""},                                     //
	{"13-mco-ignsupport-ping-script.yaml", "worker", "spec.config.stroage"},                  // 8: misspelt storage, its file would be lost
	{"14-cnf-disable-chronyd-ign22.yaml", "worker-cnf", ""},                                  // 9: Ignition 2.2; 1: unit with contents disabled
	{"15-cnf-container-mount-namespace.yaml", "", ""},                                        // issue 26.3: filesystem: root, accepted with a warning
	{"16-cnf-localhost-wa-worker.yaml", "worker", ""},                                        // issue 26.3: filesystem: root, accepted with a warning
	{"17-telco-container-mount-ns-kubelet-worker.yaml", "worker", ""},                        //
	{"18-telco-disk-encryption-rebind-worker.yaml", "worker", ""},                            //
	{"19-telco-sctp-worker-ign22.yaml", "worker", ""},                                        // 9: Ignition 2.2 translated
	{"20-telco-kdump-worker.yaml", "worker", ""},                                             //
	{"21-telco-set-rcu-normal-worker.yaml", "worker", ""},                                    //
	{"22-telco-rename-gnrd-interfaces-worker.yaml", "worker", ""},                            //
	{"23-telco-sync-time-once-worker.yaml", "worker", ""},                                    //
	{"24-telco-core-load-kernel-modules.yaml", "worker", ""},                                 //
	{"25-telco-core-setsebool.yaml", "worker", ""},                                           //
	{"26-dlbewley-automount-sssd-gzip.yaml", "worker-automount", ""},                         //
	{"27-dlbewley-message-tmp.yaml", "dne", "spec.config.storage.files[0].path"},             // /tmp is neither image nor node state
	{"28-dlbewley-multipath-gzip.yaml", "worker", ""},                                        //
	{"29-toolbox-mcp-with-mc.yaml", "worker-bm", ""},                                         // 7: its pool selects it; issue 26.3: filesystem: root, empty networkd
	{"30-insights-00-worker.yaml", "worker", ""},                                             // 4: fips: false, nulls, kernelType ""
	{"31-sap-75-worker-sdi-ign22.yaml", "sdi", ""},                                           // 9: Ignition 2.2 translated
	{"32-intel-iommu-on.yaml", "worker", "spec.selector"},                                    // 4: not a MachineConfig field; pruned, it would apply to every node (5 splits its kargs)
	{"33-agnosticd-etcd-disk.yaml", "master", "spec.config.storage.disks[0]"},                // disk layout is set at installation
	{"34-agnosticd-scsi-udev.yaml", "worker", ""},                                            // issue 26.3: empty networkd, filesystem: root, accepted with a warning
	{"35-docs-multipath-kargs-worker.yaml", "worker", ""},                                    //
	{"36-docs-rtkernel-worker.yaml", "worker", ""},                                           //
	{"37-installer-02-master-kubelet.yaml", "master", ""},                                    //
	{"38-installer-99-worker-kerneltype.yaml", "worker", ""},                                 //
	{"39-kenmoini-core-password.yaml", "worker", "spec.config.passwd.users[0].passwordHash"}, // users are not created by an image
	{"40-cgwalters-instance-store-ign30.yaml", "worker", ""},                                 //
}

// TestCorpus renders every file of the corpus alone and checks its outcome,
// so that a change in how any of them renders fails the build:
//   - as the corpus's run.sh does, with --pool worker: a file for another
//     pool, or for none, is refused for selecting nothing;
//   - for its own pool, when that is not worker;
//   - as published by OpenShift (testdata/corpus-openshift), which must
//     render byte for byte the same, or be refused with the same message.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, tc := range corpusCases {
		rows[tc.file] = true
	}
	for _, f := range files {
		if !rows[filepath.Base(f)] {
			t.Errorf("%s has no row in corpusCases", f)
		}
	}
	if len(files) != len(corpusCases) {
		t.Errorf("%d files, %d rows", len(files), len(corpusCases))
	}

	for _, tc := range corpusCases {
		t.Run(strings.TrimSuffix(tc.file, ".yaml"), func(t *testing.T) {
			pools := []string{"worker"}
			if tc.pool != "worker" {
				pools = append(pools, tc.pool)
			}
			for _, pool := range pools {
				flag := "--pool " + pool
				if pool == "" {
					flag = "a pool selecting all"
				}
				got := renderCorpus(t, "testdata/corpus", tc.file, pool)
				switch {
				case pool == "worker" && tc.pool != "worker":
					if !strings.Contains(got.err, "pool worker selects no MachineConfig") {
						t.Errorf("%s: want a refusal for selecting nothing, got %s", flag, got)
					}
				case tc.refused == "" && got.err != "":
					t.Errorf("%s: refused, want it rendered:\n%s", flag, got.err)
				case tc.refused != "" && !strings.Contains(got.err, tc.refused):
					t.Errorf("%s: want a refusal naming %s, got %s", flag, tc.refused, got)
				}

				openshift := renderCorpus(t, "testdata/corpus-openshift", tc.file, pool)
				openshift.err = strings.ReplaceAll(openshift.err, "testdata/corpus-openshift/", "testdata/corpus/")
				// Messages name the role label as the input wrote it.
				openshift.err = strings.ReplaceAll(openshift.err, openShiftRoleLabel, v1alpha1.RoleLabel)
				if openshift.err != got.err || !maps.EqualFunc(openshift.context, got.context, bytes.Equal) {
					t.Errorf("%s: OpenShift's original renders differently:\n%s\nconverted:\n%s", flag, openshift, got)
				}
			}
		})
	}
}

// corpusResult is what a render of a corpus file gave: the refusal, or the
// build context and node items.
type corpusResult struct {
	err     string
	context map[string][]byte
}

func (r corpusResult) String() string {
	if r.err != "" {
		return "refused:\n" + r.err
	}
	return "rendered"
}

// renderCorpus renders one corpus file for a pool; pool "" is a pool that
// selects every MachineConfig.
func renderCorpus(t *testing.T, dir, file, pool string) corpusResult {
	t.Helper()
	tmp := t.TempDir()
	out := filepath.Join(tmp, "ctx")
	items := filepath.Join(tmp, "node-items.json")
	args := []string{"-f", filepath.Join(dir, file), "--base", base, "--arch", "amd64", "-o", out, "--node-items", items}
	if pool == "" {
		args = append(args, "-f", "testdata/pool-all.yaml", "--pool", "all")
	} else {
		args = append(args, "--pool", pool)
	}
	if _, err := runRender(t, args...); err != nil {
		return corpusResult{err: err.Error()}
	}
	ctx := readContext(t, out)
	data, err := os.ReadFile(items)
	if err != nil {
		t.Fatal(err)
	}
	ctx["node-items.json"] = data
	return corpusResult{context: ctx}
}
