// Package cmd_test checks the contract every Strata binary keeps: it
// builds, answers --help and --version, and what is not implemented says
// so and exits non-zero.
package cmd_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func build(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-ldflags", "-X github.com/strata-dev/strata/internal/version.Version=v9.8.7-test", "-o", out, "./"+name)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, b)
	}
	return out
}

func run(bin string, args ...string) (string, int) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	return string(out), 0
}

func TestBinaries(t *testing.T) {
	for _, name := range []string{"strata-controller", "strata-daemon", "stratactl"} {
		t.Run(name, func(t *testing.T) {
			bin := build(t, name)
			out, code := run(bin, "--version")
			if code != 0 || !strings.Contains(out, name+" v9.8.7-test") {
				t.Errorf("--version: exit %d, output %q", code, out)
			}
			out, code = run(bin, "--help")
			if code != 0 || !strings.Contains(out, "Usage:") {
				t.Errorf("--help: exit %d, output %q", code, out)
			}
			if _, code = run(bin, "--no-such-flag"); code == 0 {
				t.Error("an unknown flag exited 0")
			}
		})
	}
}

func TestUnimplementedSaysSo(t *testing.T) {
	out, code := run(build(t, "strata-daemon"))
	if code == 0 || !strings.Contains(out, "not implemented") {
		t.Errorf("strata-daemon: exit %d, output %q; want a non-zero exit that says it is not implemented", code, out)
	}
}
