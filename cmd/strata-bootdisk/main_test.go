package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/diskjob"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/diskartifact"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/test/testregistry"
)

const password = "bootdisk-cmd-Passw0rd"

func authFile(t *testing.T, reg *testregistry.Registry, pw string) string {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(reg.User + ":" + pw))
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
	p := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runBootdisk runs the program and returns its exit code, report and log.
func runBootdisk(t *testing.T, args ...string) (int, diskjob.Report, string) {
	t.Helper()
	term := filepath.Join(t.TempDir(), "termination-log")
	var stderr bytes.Buffer
	code := run(context.Background(), append(args, "--termination-log="+term, "--work-dir="+t.TempDir()), &stderr)
	raw, err := os.ReadFile(term)
	if err != nil {
		t.Fatalf("no report (exit %d, log %s): %v", code, stderr.String(), err)
	}
	if len(raw) > 4096 {
		t.Errorf("report of %d bytes, over the kubelet's 4096", len(raw))
	}
	var r diskjob.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("report %q: %v", raw, err)
	}
	return code, r, stderr.String()
}

func TestMakesAndPublishes(t *testing.T) {
	reg := testregistry.Start(t, password)
	image := bootableImage(t, reg)
	auth := authFile(t, reg, password)
	code, r, log := runBootdisk(t, "--image="+image, "--size-mib=64", "--auth-file="+auth, "--insecure-registry="+reg.Host)
	if code != 0 {
		t.Fatalf("exit %d, report %+v, log:\n%s", code, r, log)
	}
	if r.Size != 64<<20 || r.Step != "" || !strings.HasPrefix(r.Artifact, strings.Split(image, "@")[0]+"@sha256:") {
		t.Errorf("report %+v", r)
	}
	kc, err := registry.KeychainFromFile(auth)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "disk.raw")
	d, err := diskartifact.Download(context.Background(), registry.Client{Insecure: []string{reg.Host}}, r.Artifact, kc, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Image != image || d.RawDigest != r.RawDigest || d.CompressedSize != r.CompressedSize {
		t.Errorf("downloaded %+v, report %+v", d, r)
	}
	// An ext4 file system with the image's files.
	// The image's /etc is where the booted system reads it.
	root := deploymentRoot(t, out)
	if hello, err := exec.Command("debugfs", "-R", "cat "+root+"etc/strata/hello", out).Output(); err != nil || string(hello) != "from the image\n" {
		t.Errorf("debugfs cat %setc/strata/hello: %q, %v", root, hello, err)
	}
	stat, err := exec.Command("debugfs", "-R", "stat "+root+"usr/bin/setuid", out).CombinedOutput()
	if err != nil || !strings.Contains(string(stat), "Type: regular") {
		t.Errorf("debugfs stat usr/bin/setuid: %v\n%s", err, stat)
	}
	if strings.Contains(log, password) {
		t.Error("the log shows the password")
	}
}

func TestFailuresSayWhatToDo(t *testing.T) {
	reg := testregistry.Start(t, password)
	image := bootableImage(t, reg)
	for _, c := range []struct {
		name string
		args []string
		step v1alpha1.BuildStep
		want string
	}{
		{"too small", []string{"--size-mib=1", "--auth-file=" + authFile(t, reg, password)}, v1alpha1.BuildStepDisk, "spec.bootDisk.sizeMiB"},
		{"wrong password", []string{"--size-mib=64", "--auth-file=" + authFile(t, reg, "not-the-password")}, v1alpha1.BuildStepAuth, "read image " + image},
		{"by tag", []string{"--size-mib=64"}, v1alpha1.BuildStepPrepare, "not by digest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := image
			if c.step == v1alpha1.BuildStepPrepare {
				img = strings.Split(image, "@")[0] + ":build-1"
			}
			code, r, log := runBootdisk(t, append(c.args, "--image="+img, "--insecure-registry="+reg.Host)...)
			if code != job.ExitCodePermanent || r.Step != c.step || !strings.Contains(r.Message, c.want) || r.Artifact != "" {
				t.Errorf("exit %d, report %+v; want exit %d, step %s saying %q\nlog:\n%s", code, r, job.ExitCodePermanent, c.step, c.want, log)
			}
			for _, s := range []string{log, r.Message, r.LogTail} {
				if strings.Contains(s, password) || strings.Contains(s, "not-the-password") {
					t.Error("the report or the log shows a password")
				}
			}
		})
	}
}
