package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if err != nil || !bytes.Contains(data, []byte(`"/var/lib/strata/marker"`)) {
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
		`testdata/bad.yaml: MachineConfig 30-bad: spec.kernelArguments[0]: Invalid value: "two words"`,
		`testdata/bad.yaml: MachineConfig 30-bad: spec.config.storage.files[1].path: Invalid value: "/proc/sys/kernel/x"`,
		`testdata/bad.yaml: MachineConfig 30-bad: spec.config.storage.files[1].contents.source: Invalid value: "https://example.com/x"`,
		`testdata/bad.yaml: MachineConfig 40-typo: error unmarshaling JSON: while decoding JSON: json: unknown field "kernelArgs"`,
		`testdata/bad.yaml: MachineOSConfig worker: spec.containerFile[0].content: Invalid value: "line 2": FROM is not allowed`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestRenderNeedsDigest(t *testing.T) {
	_, err := runRender(t, "-f", "testdata/machineconfigs.yaml", "--pool", "worker", "--base", "quay.io/x/os:latest", "-o", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `baseImage: Invalid value: "quay.io/x/os:latest"`) {
		t.Errorf("error = %v", err)
	}
}
