package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/testregistry"
)

// TestDaemonClientOnTheSimulator (issue 21 points 4 and 5): the daemon's
// bootc client, run against this command as the node's bootc and
// systemctl, finds the options each bootc release has in its help, is
// refused switch --download-only by 1.16 the way clap refuses it, stages
// locked and applies with a soft reboot on the newer release, and sees
// the soft reboot in systemd's count.
func TestDaemonClientOnTheSimulator(t *testing.T) {
	reg := testregistry.Start(t, "")
	ref1, _ := pushImage(t, reg, "strata/dc:1", map[string]string{"etc/dc.conf": "1\n"})
	ref2, digest2 := pushImage(t, reg, "strata/dc:2", map[string]string{"etc/dc.conf": "2\n"})
	root := filepath.Join(t.TempDir(), "node")
	t.Cleanup(func() {
		if err := bootcsim.Cleanup(root); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	// The test binary runs as bootc-sim for its children (TestMain).
	t.Setenv(asMain, "1")
	t.Setenv(rootEnv, root)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := &bootc.Command{Argv: []string{self}}
	mustCLI(t, "sim", "init", ref1)

	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (bootc.Capabilities{UpgradeDownloadOnly: true, SoftReboot: true, EnforceSigPolicy: true}); caps != want {
		t.Fatalf("1.16 capabilities %+v, want %+v", caps, want)
	}
	// --enforce-container-sigpolicy reaches the simulator's policy check:
	// this node has no policy.json, so nothing can be verified.
	if err := c.SwitchWith(ctx, ref2, bootc.SwitchOptions{EnforceSigPolicy: true}); err == nil || !strings.Contains(err.Error(), "/etc/containers/policy.json") {
		t.Fatalf("1.16 switch --enforce-container-sigpolicy without a policy: %v, want a refusal naming policy.json", err)
	}
	err = c.SwitchWith(ctx, ref2, bootc.SwitchOptions{DownloadOnly: true})
	if err == nil || !strings.Contains(err.Error(), "exit status 2") || !strings.Contains(err.Error(), "error: unexpected argument '--download-only' found") {
		t.Fatalf("1.16 switch --download-only: %v, want clap's refusal", err)
	}
	if h, err := c.Status(ctx); err != nil || h.Status.Staged != nil {
		t.Fatalf("after a refused switch: %v, staged %+v", err, h.Status.Staged)
	}

	if r := cli(t, "switch", "--from-downloaded"); r.code != 2 || !strings.Contains(r.stderr, "unexpected argument '--from-downloaded'") {
		t.Fatalf("1.16 switch --from-downloaded: %+v", r)
	}
	mustCLI(t, "sim", "bootc-version", string(bootcsim.VersionMain))
	if out := mustCLI(t, "sim", "bootc-version"); out != "main\n" {
		t.Fatalf("sim bootc-version printed %q", out)
	}
	if caps, err = c.Capabilities(ctx); err != nil || !caps.LockedStaging() || !caps.SoftReboot {
		t.Fatalf("main capabilities %+v, %v", caps, err)
	}
	if err := c.SwitchWith(ctx, ref2, bootc.SwitchOptions{DownloadOnly: true}); err != nil {
		t.Fatal(err)
	}
	h, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status.Staged.Digest() != digest2 || !h.Status.Staged.DownloadOnly || !h.Status.Staged.SoftRebootCapable {
		t.Fatalf("staged %+v", h.Status.Staged)
	}

	sc := &bootc.Systemctl{Argv: []string{self, "sim", "systemctl"}}
	if n, err := sc.SoftRebootCount(ctx); err != nil || n != 0 {
		t.Fatalf("count %d, %v", n, err)
	}
	if err := c.ApplyDownloaded(ctx, bootc.Apply{Reboot: true, SoftReboot: bootc.SoftRebootRequired}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, ".bootc-sim", "reboot-requested")); string(got) != "soft-reboot\n" {
		t.Fatalf("reboot request %q, want a soft reboot", got)
	}
	mustCLI(t, "sim", "soft-reboot")
	if r := cli(t, "switch", "--from-downloaded"); r.code != 1 || !strings.Contains(r.stderr, "No staged deployment found") {
		t.Fatalf("main switch --from-downloaded with nothing staged: %+v", r)
	}
	if n, err := sc.SoftRebootCount(ctx); err != nil || n != 1 {
		t.Fatalf("count %d, %v after a soft reboot", n, err)
	}
	if out := mustCLI(t, "sim", "systemctl", "show", "-P", "SoftRebootsCount"); out != "1\n" {
		t.Fatalf("show -P printed %q", out)
	}
	if h, err = c.Status(ctx); err != nil || h.Status.Booted.Digest() != digest2 {
		t.Fatalf("booted after the soft reboot: %v %+v", err, h.Status.Booted)
	}
	if r := cli(t, "sim", "systemctl", "show", "-p", "NRestarts"); r.code != 1 || !strings.Contains(r.stderr, "not simulated") {
		t.Fatalf("an unsimulated property: %+v", r)
	}
	if r := cli(t, "upgrade", "--download-only", "--apply"); r.code != 2 || !strings.Contains(r.stderr, "cannot be used with") {
		t.Fatalf("upgrade --download-only --apply: %+v", r)
	}
	if r := cli(t, "switch", "--soft-reboot=always", ref1); r.code != 2 || !strings.Contains(r.stderr, "[possible values: required, auto]") {
		t.Fatalf("switch --soft-reboot=always: %+v", r)
	}
	if r := cli(t, "switch", "--no-such-option", ref1); r.code != 2 || !strings.Contains(r.stderr, "unexpected argument '--no-such-option'") {
		t.Fatalf("an unknown option: %+v", r)
	}
}

// TestInitBootcVersion: the release is chosen at install, as simnode's
// Config.BootcVersion does; one the simulator does not model is refused
// before anything is installed.
func TestInitBootcVersion(t *testing.T) {
	reg := testregistry.Start(t, "")
	ref, _ := pushImage(t, reg, "strata/iv:1", map[string]string{"etc/iv.conf": "1\n"})
	root := filepath.Join(t.TempDir(), "node")
	t.Cleanup(func() {
		if err := bootcsim.Cleanup(root); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	sr := "--sim-root=" + root
	if r := cli(t, sr, "sim", "init", ref, "--bootc-version", "1.17"); r.code != 1 || !strings.Contains(r.stderr, "not simulated") {
		t.Fatalf("init with an unknown release: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(root, ".bootc-sim")); err == nil {
		t.Fatal("a refused init installed the node")
	}
	mustCLI(t, sr, "sim", "init", ref, "--bootc-version", "main")
	if out := mustCLI(t, sr, "sim", "bootc-version"); out != "main\n" {
		t.Fatalf("release %q, want main", out)
	}
}
