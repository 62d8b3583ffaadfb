package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
)

const base = "registry.example.com/os/base@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func runRender(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRenderCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage = true
	err := cmd.Execute()
	return out.String(), err
}

func TestRender(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ctx")
	items := filepath.Join(t.TempDir(), "items.json")
	out, err := runRender(t, "-f", "testdata/machineconfigs.yaml", "-f", "testdata/machineosconfig.yaml",
		"--base", base, "--arch", "amd64", "-o", dir, "--node-items", items)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Rendered rendered-worker-") {
		t.Errorf("output: %s", out)
	}
	cf, err := os.ReadFile(filepath.Join(dir, "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FROM " + base + "\n", "ADD rootfs.tar /\n", "RUN echo layered > /etc/strata-layered\n",
		`LABEL machineconfiguration.strata.dev/pool="worker"`} {
		if !bytes.Contains(cf, []byte(want)) {
			t.Errorf("Containerfile lacks %q:\n%s", want, cf)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "rootfs.tar")); err != nil {
		t.Error(err)
	}
	data, err := os.ReadFile(items)
	if err != nil || !bytes.Contains(data, []byte(`"/var/lib/strata-test/marker"`)) {
		t.Errorf("node items: %s %v", data, err)
	}

	// The same input renders the same, whatever the order of the files.
	dir2 := filepath.Join(t.TempDir(), "ctx")
	if _, err := runRender(t, "-f", "testdata/machineosconfig.yaml", "-f", "testdata/machineconfigs.yaml",
		"--base", base, "--arch", "amd64", "-o", dir2); err != nil {
		t.Fatal(err)
	}
	cf2, _ := os.ReadFile(filepath.Join(dir2, "Containerfile"))
	if !bytes.Equal(cf, cf2) {
		t.Errorf("Containerfile depends on the order of -f:\n%s\n%s", cf, cf2)
	}

	// A second render into the same directory is refused.
	if _, err := runRender(t, "-f", "testdata/machineconfigs.yaml", "--pool", "worker", "--base", base, "-o", dir); err == nil ||
		!strings.Contains(err.Error(), "is not empty") {
		t.Errorf("error = %v, want a refusal of a non-empty directory", err)
	}
}

func TestRenderErrorsNameFileObjectAndField(t *testing.T) {
	_, err := runRender(t, "-f", "testdata/machineconfigs.yaml", "-f", "testdata/bad.yaml", "--base", base, "-o", t.TempDir())
	if err == nil {
		t.Fatal("rendered bad input")
	}
	for _, want := range []string{
		`testdata/bad.yaml:8: MachineConfig 30-bad: spec.kernelArguments[0]: Invalid value: "a\tb"`,
		`testdata/bad.yaml:14: MachineConfig 30-bad: spec.config.storage.files[1].path: Invalid value: "/proc/sys/kernel/x"`,
		`testdata/bad.yaml:15: MachineConfig 30-bad: spec.config.storage.files[1].contents.source: Invalid value: "https://example.com/x"`,
		`testdata/bad.yaml: MachineConfig 40-typo: spec.kernelArgs: unknown field`,
		`testdata/bad.yaml: MachineOSConfig worker: spec.containerFile[0].content: Invalid value: "line 2": FROM is not allowed`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestRenderNeedsDigest: a base by tag is refused naming where it came
// from, here the flag (corpus-issue26/01-osimageurl-by-tag.yaml has one
// from a MachineConfig's osImageURL).
func TestRenderNeedsDigest(t *testing.T) {
	_, err := runRender(t, "-f", "testdata/machineconfigs.yaml", "--pool", "worker", "--base", "quay.io/x/os:latest", "-o", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `--base: Invalid value: "quay.io/x/os:latest"`) {
		t.Errorf("error = %v", err)
	}
}

// writeFile writes a test's input into its temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A MachineConfig as a cluster prints it, every spec field with its
// default (the corpus's repro/d4-exported-fields.yaml), renders as if the
// defaults were absent.
func TestRenderExportedDefaults(t *testing.T) {
	out, err := runRender(t, "-f", "testdata/d4-exported-fields.yaml", "-f", "testdata/pool-all.yaml", "--base", base, "-o", filepath.Join(t.TempDir(), "ctx"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "MachineConfigs merged (1): 99-worker-exported") {
		t.Errorf("output: %s", out)
	}
}

// What Strata cannot do is refused by field, with the reason the API
// server gives too.
func TestRenderRefusesUnsupportedFields(t *testing.T) {
	in := writeFile(t, "mc.yaml", `apiVersion: machineconfiguration.strata.dev/v1alpha1
kind: MachineConfig
metadata:
  name: 99-worker-fips
  labels: {machineconfiguration.strata.dev/role: worker}
spec:
  fips: true
  baseOSExtensionsContainerImage: quay.io/openshift/extensions@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
`)
	_, err := runRender(t, "-f", in, "--pool", "worker", "--base", base, "-o", t.TempDir())
	if err == nil {
		t.Fatal("rendered fips: true")
	}
	for _, want := range []string{
		in + ":7: MachineConfig 99-worker-fips: spec.fips: Invalid value: true: " + v1alpha1.FIPSUnsupportedMessage,
		in + ":8: MachineConfig 99-worker-fips: spec.baseOSExtensionsContainerImage: Invalid value: \"quay.io/openshift/extensions@sha256:",
		v1alpha1.BaseOSExtensionsContainerImageUnsupportedMessage,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// A document that does not decode is refused with the file, the object
// and the field, as the API server's strict field validation would.
func TestRenderDecodeErrorsNameField(t *testing.T) {
	in := writeFile(t, "mcs.yaml", `apiVersion: machineconfiguration.strata.dev/v1alpha1
kind: MachineConfig
metadata:
  name: 10-type
spec:
  fips: "no"
---
apiVersion: machineconfiguration.strata.dev/v1alpha1
kind: MachineConfig
metadata:
  name: 20-case
spec:
  KernelArguments: [nosmt]
---
apiVersion: machineconfiguration.strata.dev/v1alpha1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  machineConfigSelector:
    matchLabel: {machineconfiguration.strata.dev/role: worker}
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: infra
spec:
  machineConfigSelector:
    matchExpression: []
---
apiVersion: machineconfiguration.openshift.io/v1
kind: KubeletConfig
metadata:
  name: set-max-pods
`)
	_, err := runRender(t, "-f", in, "--pool", "worker", "--base", base, "-o", t.TempDir())
	if err == nil {
		t.Fatal("rendered bad input")
	}
	for _, want := range []string{
		in + `: MachineConfig 10-type: spec.fips: Invalid value: string: must be of type bool`,
		in + `: MachineConfig 20-case: spec.KernelArguments: unknown field`,
		in + `: MachineConfigPool worker: spec.machineConfigSelector.matchLabel: unknown field`,
		in + `: MachineConfigPool infra: spec.machineConfigSelector.matchExpression: unknown field`,
		in + `: KubeletConfig set-max-pods (document 5): kind: "KubeletConfig" is not MachineConfig or MachineConfigPool`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// Two pools' MachineConfigs in one input: each pool renders only what its
// selector selects, as the render controller would; a pool without a
// MachineConfigPool selects by the role label; rendered MachineConfigs are
// never sources. OpenShift's form of the same input, as `oc get -o yaml`
// prints it, renders the same.
func TestRenderSelectsByPool(t *testing.T) {
	for _, tc := range []struct {
		pool   string
		merged string
		files  []string // in the image
	}{
		{"worker", "MachineConfigs merged (1): 10-worker\n", []string{"etc/strata-worker"}},
		{"infra", "MachineConfigs merged (2): 10-worker, 20-infra\n", []string{"etc/strata-worker", "etc/strata-infra"}},
		{"master", "MachineConfigs merged (1): 30-master\n", []string{"etc/strata-master"}}, // no MachineConfigPool: the role label
	} {
		var contexts []map[string][]byte
		for _, input := range []string{"testdata/pools.yaml", "testdata/openshift-list.yaml"} {
			dir := filepath.Join(t.TempDir(), "ctx")
			out, err := runRender(t, "-f", input, "--pool", tc.pool, "--base", base, "-o", dir)
			if err != nil {
				t.Fatalf("%s --pool %s: %v", input, tc.pool, err)
			}
			if !strings.Contains(out, "for pool "+tc.pool+" ") || !strings.Contains(out, tc.merged) {
				t.Errorf("%s --pool %s: output:\n%s", input, tc.pool, out)
			}
			ctx := readContext(t, dir)
			names := tarNames(t, ctx["rootfs.tar"])
			for _, f := range []string{"etc/strata-worker", "etc/strata-infra", "etc/strata-master", "etc/strata-rendered"} {
				if want := slices.Contains(tc.files, f); names[f] != want {
					t.Errorf("%s --pool %s: %s in the image: %v, want %v", input, tc.pool, f, names[f], want)
				}
			}
			contexts = append(contexts, ctx)
		}
		if !maps.EqualFunc(contexts[0], contexts[1], bytes.Equal) {
			t.Errorf("pool %s: OpenShift's form renders differently", tc.pool)
		}
	}

	_, err := runRender(t, "-f", "testdata/pools.yaml", "--base", base, "-o", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "the input names 2 pools (infra, worker); render one at a time with --pool") {
		t.Errorf("several pools without --pool: %v", err)
	}
	_, err = runRender(t, "-f", "testdata/pools.yaml", "--pool", "edge", "--base", base, "-o", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "pool edge selects no MachineConfig: 10-worker (metadata.labels: machineconfiguration.strata.dev/role=worker)") ||
		!strings.Contains(err.Error(), "rendered-worker-0123456789abcdef0123456789abcdef (rendered by the controller)") {
		t.Errorf("a pool that selects nothing: %v", err)
	}
	noSelector := writeFile(t, "pool.yaml", "apiVersion: machineconfiguration.strata.dev/v1alpha1\nkind: MachineConfigPool\nmetadata: {name: worker}\nspec: {}\n")
	_, err = runRender(t, "-f", "testdata/machineconfigs.yaml", "-f", noSelector, "--base", base, "-o", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "the pool's selector is none (no machineConfigSelector)") {
		t.Errorf("a pool without a selector: %v", err)
	}
}

// readContext reads every file of a build context.
func readContext(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// tarNames lists the regular files of a tar archive.
func tarNames(t *testing.T, data []byte) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			names[strings.TrimPrefix(h.Name, "/")] = true
		}
	}
}
