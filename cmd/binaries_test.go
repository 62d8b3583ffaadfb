// Package cmd_test checks the contract every Strata binary keeps: it
// builds, answers --help and --version, and refuses an unknown flag or a
// missing required one with a non-zero exit.
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
	for _, name := range []string{"strata-controller", "strata-daemon", "stratactl", "strata-bootdisk"} {
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

// TestDaemonNeedsNodeName: without its node the daemon cannot know which
// Node to watch, and says so instead of watching none.
func TestDaemonNeedsNodeName(t *testing.T) {
	cmd := exec.Command(build(t, "strata-daemon"))
	cmd.Env = append(cmd.Environ(), "NODE_NAME=")
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(b), "--node-name") {
		t.Errorf("strata-daemon without a node: %v, output %q; want a non-zero exit that names --node-name", err, b)
	}
}

// TestLogFlags: both long-running binaries take controller-runtime's
// --zap-* flags, refuse a bad level, and log structured JSON by default.
func TestLogFlags(t *testing.T) {
	for _, name := range []string{"strata-controller", "strata-daemon"} {
		t.Run(name, func(t *testing.T) {
			bin := build(t, name)
			out, _ := run(bin, "--help")
			for _, flag := range []string{"--zap-log-level", "--zap-encoder", "--zap-devel", "--zap-stacktrace-level"} {
				if !strings.Contains(out, flag) {
					t.Errorf("--help does not list %s", flag)
				}
			}
			if out, code := run(bin, "--zap-log-level=loud"); code == 0 || !strings.Contains(out, "zap-log-level") {
				t.Errorf("--zap-log-level=loud: exit %d, output %q; want a non-zero exit that names the flag", code, out)
			}
		})
	}
}
