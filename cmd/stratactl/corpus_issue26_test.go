package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// issue26Case is one file of testdata/corpus-issue26: a few lines of our
// own for each way the second set of real MachineConfigs (issue 26) was
// treated differently from OpenShift, kept apart from testdata/corpus so
// that it keeps measuring the published files.
type issue26Case struct {
	file string
	// args are render's flags beyond -f FILE and -o DIR.
	args []string
	// refused are strings the refusal must hold; nil when the file
	// renders.
	refused []string
	// out are strings render's output must hold when it renders (its
	// warnings among them).
	out []string
	// containerfile is a string the rendered Containerfile must hold.
	containerfile string
}

var issue26Cases = []issue26Case{
	{file: "01-osimageurl-overridden.yaml", out: []string{
		`warning: MachineOSConfig worker: spec.baseImagePullSpec "quay.io/example/base@sha256:2222222222222222222222222222222222222222222222222222222222222222" overrides testdata/corpus-issue26/01-osimageurl-overridden.yaml:11: MachineConfig 99-worker-os-image: spec.osImageURL "quay.io/example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"`,
	}, containerfile: "FROM quay.io/example/base@sha256:2222222222222222222222222222222222222222222222222222222222222222\n"},
	{file: "01-osimageurl-is-base.yaml",
		containerfile: "FROM quay.io/example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111\n"},
	{file: "01-osimageurl-by-tag.yaml", args: []string{"--pool", "worker"},
		refused: []string{`testdata/corpus-issue26/01-osimageurl-by-tag.yaml:10: MachineConfig 99-worker-os-tag: spec.osImageURL: Invalid value: "quay.io/example/os:latest": must be registry/repository@sha256:<digest>`}},
	{file: "03-ignition2-leftovers.yaml", args: []string{"--pool", "worker", "--base", base},
		out: []string{
			`warning: testdata/corpus-issue26/03-ignition2-leftovers.yaml:13: MachineConfig 99-worker-leftovers: spec.config.networkd: an empty "networkd" is Ignition 2.x; ignored, as OpenShift ignores it; remove the key`,
			`warning: testdata/corpus-issue26/03-ignition2-leftovers.yaml:16: MachineConfig 99-worker-leftovers: spec.config.storage.files[0].filesystem: "filesystem: root" is Ignition 2.x; ignored`,
		}},
	{file: "03-ignition2-leftover-other-fs.yaml", args: []string{"--pool", "worker", "--base", base},
		refused: []string{`03-ignition2-leftover-other-fs.yaml:15: MachineConfig 99-worker-other-fs: spec.config.storage.files[0].filesystem: Invalid value: "filesystem": key unknown to Ignition 3.2.0`}},
	{file: "03-ignition2-leftover-networkd-units.yaml", args: []string{"--pool", "worker", "--base", base},
		refused: []string{`03-ignition2-leftover-networkd-units.yaml:13: MachineConfig 99-worker-networkd-units: spec.config.networkd: Invalid value: "networkd": key unknown to Ignition 3.2.0`}},
	{file: "04-positions-ign3.yaml", args: []string{"--pool", "worker", "--base", base},
		refused: []string{`testdata/corpus-issue26/04-positions-ign3.yaml:32: MachineConfig 20-worker-bad-source: spec.config.storage.files[2].contents.source: Invalid value: "data:;base64,!!!": Ignition: invalid data character` + "\n"}},
	{file: "04-positions-ign2.yaml", args: []string{"--pool", "worker", "--base", base},
		refused: []string{`testdata/corpus-issue26/04-positions-ign2.yaml:20: MachineConfig 20-worker-ign22: spec.config.storage.files[1].path: Invalid value: "etc/relative": Ignition 2.2.0: path not absolute` + "\n"}},
	{file: "04-positions-json.yaml", args: []string{"--pool", "worker", "--base", base},
		refused: []string{`testdata/corpus-issue26/04-positions-json.yaml:20: MachineConfig 20-worker-json: spec.config.storage.files[1].path: Invalid value: "/proc/x": must not be under /proc`}},
	{file: "05-openshift-role-none-selected.yaml", args: []string{"--pool", "worker", "--base", base},
		refused: []string{"pool worker selects no MachineConfig: 99-master (metadata.labels: machineconfiguration.openshift.io/role=master); " +
			"the pool's selector is machineconfiguration.openshift.io/role=worker (the role label, as no MachineConfigPool worker is given)"}},
	{file: "05-openshift-role-none-selected.yaml", args: []string{"--pool", "infra", "--base", base},
		refused: []string{"pool infra selects no MachineConfig: 99-master (metadata.labels: machineconfiguration.openshift.io/role=master); " +
			"the pool's selector is machineconfiguration.openshift.io/role=infra (spec.machineConfigSelector of testdata/corpus-issue26/05-openshift-role-none-selected.yaml: MachineConfigPool infra)"}},
	{file: "05-openshift-role-unselected.yaml", args: []string{"--pool", "worker", "--base", base},
		out: []string{"not selected by the pool: 99-master (metadata.labels: machineconfiguration.openshift.io/role=master)"}},
	{file: "06-document-end-marker.yaml", args: []string{"--pool", "worker", "--base", base},
		out: []string{"MachineConfigs merged (3): 50-first, 51-second, 52-third"}},
}

// TestCorpusIssue26 renders each file of testdata/corpus-issue26 and checks
// its outcome.
func TestCorpusIssue26(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus-issue26/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, tc := range issue26Cases {
		rows[tc.file] = true
	}
	for _, f := range files {
		if !rows[filepath.Base(f)] {
			t.Errorf("%s has no row in issue26Cases", f)
		}
	}
	for _, tc := range issue26Cases {
		t.Run(strings.TrimSuffix(tc.file, ".yaml")+strings.Join(tc.args, "_"), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ctx")
			args := append([]string{"-f", filepath.Join("testdata/corpus-issue26", tc.file), "-o", dir}, tc.args...)
			out, err := runRender(t, args...)
			switch {
			case tc.refused == nil && err != nil:
				t.Fatalf("refused, want it rendered:\n%v", err)
			case tc.refused != nil && err == nil:
				t.Fatalf("rendered, want a refusal:\n%s", out)
			}
			for _, want := range tc.refused {
				if !strings.Contains(err.Error()+"\n", want) {
					t.Errorf("refusal lacks %q:\n%v", want, err)
				}
			}
			for _, want := range tc.out {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if tc.containerfile != "" {
				cf, err := os.ReadFile(filepath.Join(dir, "Containerfile"))
				if err != nil || !strings.Contains(string(cf), tc.containerfile) {
					t.Errorf("Containerfile lacks %q (%v):\n%s", tc.containerfile, err, cf)
				}
			}
		})
	}
}
