package bootcheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	dA = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	dO = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
)

// node is a stand-in host for the script: a bootc that prints a status
// with the booted digest it is given and logs rollbacks, a systemctl that
// logs reboots. The script's own logic is what is tested; the simulator
// runs it against bootc-sim in the e2e.
type node struct {
	t   *testing.T
	dir string // the boot check's directory
	bin string
	log string
}

func newNode(t *testing.T, booted string) *node {
	t.Helper()
	root := t.TempDir()
	n := &node{t: t, dir: filepath.Join(root, "boot-check"), bin: filepath.Join(root, "bin"), log: filepath.Join(root, "calls")}
	if err := os.MkdirAll(n.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// Pretty-printed, as bootc prints it, with a rollback entry after
	// the booted one.
	status := fmt.Sprintf(`{
  "apiVersion": "org.containers.bootc/v1",
  "status": {
    "staged": null,
    "booted": {"image": {"image": {"image": "r/os@%[1]s", "transport": "registry"}, "imageDigest": "%[1]s"}},
    "rollback": {"image": {"image": {"image": "r/os@%[2]s", "transport": "registry"}, "imageDigest": "%[2]s"}},
    "rollbackQueued": false
  }
}`, booted, dO)
	n.stub("bootc", "case $1 in\nstatus) cat <<'END'\n"+status+"\nEND\n;;\nrollback) echo rollback >>"+n.log+" ;;\nesac\n")
	n.stub("systemctl", "echo \"systemctl $*\" >>"+n.log+"\n")
	return n
}

func (n *node) stub(name, body string) {
	n.t.Helper()
	if err := os.WriteFile(filepath.Join(n.bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		n.t.Fatal(err)
	}
}

// run runs the script to its end and returns the calls it made.
func (n *node) run() string {
	n.t.Helper()
	script := filepath.Join(n.t.TempDir(), "boot-check")
	if err := os.WriteFile(script, Script, 0o755); err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(script)
	cmd.Env = append(os.Environ(), "PATH="+n.bin+":"+os.Getenv("PATH"), DirEnv+"="+n.dir, PollEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		n.t.Fatalf("boot check: %v: %s", err, out)
	}
	b, _ := os.ReadFile(n.log)
	return strings.TrimSpace(string(b))
}

func TestBootCheck(t *testing.T) {
	for _, tc := range []struct {
		name      string
		booted    string
		prepare   func(n *node)
		wantCalls string
	}{{
		name:   "no update of Strata's",
		booted: dA,
	}, {
		name:      "never reported healthy",
		booted:    dA,
		prepare:   func(n *node) { must(t, WriteExpect(n.dir, dA, time.Second)) },
		wantCalls: "rollback\nsystemctl reboot",
	}, {
		name:   "reported healthy",
		booted: dA,
		prepare: func(n *node) {
			must(t, WriteExpect(n.dir, dA, time.Second))
			must(t, MarkHealthy(n.dir, dA))
		},
	}, {
		name:    "another image booted",
		booted:  dO,
		prepare: func(n *node) { must(t, WriteExpect(n.dir, dA, time.Second)) },
	}, {
		name:   "booted again after a rollback that did not take",
		booted: dA,
		prepare: func(n *node) {
			must(t, WriteExpect(n.dir, dA, time.Second))
			must(t, os.WriteFile(filepath.Join(n.dir, "boots"), []byte(dA+" 1\n"), 0o644))
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.booted)
			if tc.prepare != nil {
				tc.prepare(n)
			}
			if got := n.run(); got != tc.wantCalls {
				t.Errorf("calls %q, want %q", got, tc.wantCalls)
			}
			verdict := Verdict(n.dir, dA)
			if rolledBack := tc.wantCalls != ""; rolledBack != (verdict != "") {
				t.Errorf("verdict %q", verdict)
			}
			if tc.wantCalls != "" && !strings.Contains(verdict, "never started verifying") {
				t.Errorf("verdict %q does not say the daemon never verified", verdict)
			}
		})
	}
}

// TestBootCheckWaitsForVerifyingDaemon: a daemon that verifies the boot
// itself owns the verdict and its own rollback for one more timeout;
// only after it does the check roll back.
func TestBootCheckWaitsForVerifyingDaemon(t *testing.T) {
	n := newNode(t, dA)
	must(t, WriteExpect(n.dir, dA, time.Second))
	must(t, MarkVerifying(n.dir, dA))
	start := time.Now()
	if calls := n.run(); calls != "rollback\nsystemctl reboot" {
		t.Errorf("calls %q", calls)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("rolled back after %s, before twice the timeout", took)
	}
	if v := Verdict(n.dir, dA); v == "" || strings.Contains(v, "never started") {
		t.Errorf("verdict %q", v)
	}
}

func TestWriteExpectStartsOver(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bc")
	must(t, WriteExpect(dir, dA, time.Minute))
	must(t, os.WriteFile(filepath.Join(dir, "verdict"), []byte(dA+" boot check: x\n"), 0o644))
	if got := Verdict(dir, dA); got != "boot check: x" {
		t.Errorf("verdict %q", got)
	}
	if got := Verdict(dir, dO); got != "" {
		t.Errorf("verdict for another digest %q", got)
	}
	must(t, WriteExpect(dir, dO, 90*time.Second))
	if got := Verdict(dir, dA); got != "" {
		t.Errorf("verdict %q survived a new check", got)
	}
	b, err := os.ReadFile(filepath.Join(dir, "expect"))
	must(t, err)
	if string(b) != "digest="+dO+"\ntimeout=90\n" {
		t.Errorf("expect %q", b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
