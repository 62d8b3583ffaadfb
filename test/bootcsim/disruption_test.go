package bootcsim_test

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

func expectRequest(t *testing.T, s *bootcsim.Sim, want bootcsim.RebootKind) {
	t.Helper()
	kind, ok, err := s.RebootRequest()
	if err != nil {
		t.Fatal(err)
	}
	if want == "" && ok {
		t.Fatalf("a %s was requested, want none", kind)
	}
	if want != "" && (!ok || kind != want) {
		t.Fatalf("request %q (%v), want %q", kind, ok, want)
	}
}

func softReboots(t *testing.T, s *bootcsim.Sim) int {
	t.Helper()
	n, err := s.SoftReboots()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSoftReboot (issue 21 point 4): a deployment with the booted kernel,
// initramfs and local kernel arguments is soft-reboot capable, even when
// only the image's kargs.d changed (bootc issue 1350, modelled as bootc
// 1.16 has it); --apply --soft-reboot=auto asks for a soft reboot, which
// switches the booted deployment and keeps the boot id while the
// soft-reboot count goes up. A full reboot resets the count.
func TestSoftReboot(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	one, two := twoImages(t, reg) // kargs.d differs: strata.image=one, =two
	s, out := newNode(t)
	if err := s.Init(ctx, one.Ref); err != nil {
		t.Fatal(err)
	}
	id := bootID(t, s)
	if h := status(t, s); h.Status.Booted.SoftRebootCapable {
		t.Fatal("the booted deployment reports itself soft-reboot capable")
	}
	if _, err := s.Switch(ctx, two.Ref, bootcsim.SwitchOptions{Apply: true, SoftReboot: bootc.SoftRebootAuto}); err != nil {
		t.Fatal(err)
	}
	h := status(t, s)
	expectEntries(t, h, two.Digest, one.Digest, "", false)
	if !h.Status.Staged.SoftRebootCapable || h.Status.Booted.SoftRebootCapable || h.Status.Staged.DownloadOnly {
		t.Fatalf("staged capable %v locked %v, booted capable %v; want true false false",
			h.Status.Staged.SoftRebootCapable, h.Status.Staged.DownloadOnly, h.Status.Booted.SoftRebootCapable)
	}
	if !strings.Contains(out.String(), "preparing for soft-reboot") {
		t.Errorf("switch printed %q", out)
	}
	expectRequest(t, s, bootcsim.RebootSoft)
	// The daemon's /run survives a soft reboot, not a full one.
	if err := os.WriteFile(filepath.Join(s.Root, "run", "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := s.SoftReboot(ctx); err != nil {
		t.Fatal(err)
	}
	if got := bootID(t, s); got != id {
		t.Fatalf("boot id %s after a soft reboot, want %s kept", got, id)
	}
	if n := softReboots(t, s); n != 1 {
		t.Fatalf("SoftRebootsCount %d, want 1", n)
	}
	expectEntries(t, status(t, s), "", two.Digest, one.Digest, false)
	expectFile(t, filepath.Join(s.Root, "etc", "motd"), "motd two\n")
	expectKargs(t, s, "console=ttyS0", "strata.image=two")
	expectRequest(t, s, "")
	expectFile(t, filepath.Join(s.Root, "run", "marker"), "")
	expectNoFile(t, filepath.Join(s.Root, "run", "nextroot"))

	// A soft reboot with nothing staged restarts userspace in place.
	if err := s.SoftReboot(ctx); err != nil {
		t.Fatal(err)
	}
	if n := softReboots(t, s); n != 2 || bootID(t, s) != id {
		t.Fatalf("count %d, boot id changed %v", n, bootID(t, s) != id)
	}
	expectEntries(t, status(t, s), "", two.Digest, one.Digest, false)

	if err := s.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	if n := softReboots(t, s); n != 0 || bootID(t, s) == id {
		t.Fatalf("after a full reboot: count %d, boot id kept %v", n, bootID(t, s) == id)
	}
	expectNoFile(t, filepath.Join(s.Root, "run", "marker"))
}

// TestSoftRebootRefusedForAnotherKernel: an image with another kernel is
// not soft-reboot capable; "required" fails as bootc does, leaving the
// deployment staged and nothing to reboot; "auto" falls back to a full
// reboot.
func TestSoftRebootRefusedForAnotherKernel(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	one, _ := twoImages(t, reg)
	kernel := pushImage(t, reg, "strata/os:kernel", "3", map[string]string{
		"etc/motd":                            "motd kernel\n",
		"usr/lib/modules/6.1.0-other/vmlinuz": "another kernel\n",
	})
	s, _ := newNode(t)
	if err := s.Init(ctx, one.Ref); err != nil {
		t.Fatal(err)
	}
	_, err := s.Switch(ctx, kernel.Ref, bootcsim.SwitchOptions{Apply: true, SoftReboot: bootc.SoftRebootRequired})
	if err == nil || !strings.Contains(err.Error(), "Soft reboot was required but staged deployment is not soft-reboot capable") {
		t.Fatalf("switch --soft-reboot=required: %v, want bootc's refusal", err)
	}
	h := status(t, s)
	expectEntries(t, h, kernel.Digest, one.Digest, "", false)
	if h.Status.Staged.SoftRebootCapable {
		t.Fatal("a deployment with another kernel reports soft-reboot capable")
	}
	expectRequest(t, s, "")
	expectNoFile(t, filepath.Join(s.Root, "run", "nextroot"))
	if err := s.SoftReboot(ctx); err == nil {
		t.Fatal("a soft reboot into an unprepared staged deployment was simulated")
	}

	// auto: bootc stages (already staged: unchanged) and reboots fully.
	if err := s.Upgrade(ctx, bootcsim.UpgradeOptions{Apply: true, SoftReboot: bootc.SoftRebootAuto}); err != nil {
		t.Fatal(err)
	}
	expectRequest(t, s, bootcsim.RebootFull)
}

// TestLockedStaging (issue 21 point 5): a download-only deployment is
// not booted by an unplanned reboot, clean or not (the booted image boots
// again and the download is dropped, as ostree drops a staged deployment
// it never finalized); --from-downloaded --apply unlocks it and reboots
// into it. An unlocked staged deployment is finalized by a clean reboot
// but not by a crash, which runs no shutdown.
func TestLockedStaging(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	one, two := twoImages(t, reg)
	s, _ := newNode(t)
	if err := s.Init(ctx, one.Ref); err != nil {
		t.Fatal(err)
	}
	if v, err := s.BootcVersion(); err != nil || v != bootcsim.Version116 {
		t.Fatalf("default version %q, %v", v, err)
	}
	// 1.16: switch has no --download-only.
	if _, err := s.Switch(ctx, two.Ref, bootcsim.SwitchOptions{DownloadOnly: true}); err == nil {
		t.Fatal("bootc 1.16 staged with switch --download-only")
	}
	expectEntries(t, status(t, s), "", one.Digest, "", false)
	if err := s.SetBootcVersion(bootcsim.VersionMain); err != nil {
		t.Fatal(err)
	}

	for _, unplanned := range []struct {
		name   string
		reboot func(context.Context) error
	}{{"clean reboot", s.Reboot}, {"crash", s.Crash}} {
		if _, err := s.Switch(ctx, two.Ref, bootcsim.SwitchOptions{DownloadOnly: true}); err != nil {
			t.Fatal(err)
		}
		h := status(t, s)
		expectEntries(t, h, two.Digest, one.Digest, "", false)
		if !h.Status.Staged.DownloadOnly || h.Status.Booted.DownloadOnly {
			t.Fatalf("staged downloadOnly %v, booted %v", h.Status.Staged.DownloadOnly, h.Status.Booted.DownloadOnly)
		}
		id := bootID(t, s)
		if err := unplanned.reboot(ctx); err != nil {
			t.Fatal(err)
		}
		if bootID(t, s) == id {
			t.Fatalf("%s: boot id kept", unplanned.name)
		}
		expectEntries(t, status(t, s), "", one.Digest, "", false)
		expectFile(t, filepath.Join(s.Root, "etc", "motd"), "motd one\n")
	}

	// A crash does not finalize an unlocked deployment either.
	if _, err := s.Switch(ctx, two.Ref, bootcsim.SwitchOptions{}); err != nil {
		t.Fatal(err)
	}
	// bootc issue 2425: switch --download-only to the image already
	// staged unlocked changes nothing, the lock included.
	if changed, err := s.Switch(ctx, two.Ref, bootcsim.SwitchOptions{DownloadOnly: true}); err != nil || changed {
		t.Fatalf("switch --download-only to the staged image: changed %v, %v", changed, err)
	}
	if h := status(t, s); h.Status.Staged.DownloadOnly {
		t.Fatal("switch --download-only locked the deployment staged unlocked")
	}
	if err := s.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	expectEntries(t, status(t, s), "", one.Digest, "", false)

	// Staged locked, then applied.
	if _, err := s.Switch(ctx, two.Ref, bootcsim.SwitchOptions{DownloadOnly: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Upgrade(ctx, bootcsim.UpgradeOptions{FromDownloaded: true, Apply: true}); err != nil {
		t.Fatal(err)
	}
	if h := status(t, s); h.Status.Staged == nil || h.Status.Staged.DownloadOnly {
		t.Fatalf("after --from-downloaded: staged %+v", h.Status.Staged)
	}
	expectRequest(t, s, bootcsim.RebootFull)
	if err := s.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	expectEntries(t, status(t, s), "", two.Digest, one.Digest, false)
	expectFile(t, filepath.Join(s.Root, "etc", "motd"), "motd two\n")
	if err := s.Upgrade(ctx, bootcsim.UpgradeOptions{FromDownloaded: true}); err == nil || !strings.Contains(err.Error(), "No staged deployment found") {
		t.Fatalf("--from-downloaded with nothing staged: %v", err)
	}
}

// TestLockAfterSwitch: on bootc 1.16, `bootc upgrade --download-only`
// after a plain switch locks the staged deployment in place (the spec is
// the staged image, nothing new is fetched or deployed), so a clean
// reboot then boots the booted image again.
func TestLockAfterSwitch(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	one, two := twoImages(t, reg)
	s, _ := newNode(t)
	if err := s.Init(ctx, one.Ref); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Switch(ctx, two.Ref, bootcsim.SwitchOptions{}); err != nil {
		t.Fatal(err)
	}
	before := status(t, s).Status.Staged.Ostree
	if err := s.Upgrade(ctx, bootcsim.UpgradeOptions{DownloadOnly: true}); err != nil {
		t.Fatal(err)
	}
	h := status(t, s)
	if !h.Status.Staged.DownloadOnly || *h.Status.Staged.Ostree != *before {
		t.Fatalf("staged locked %v, deployment %+v was %+v", h.Status.Staged.DownloadOnly, *h.Status.Staged.Ostree, *before)
	}
	if err := s.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	expectEntries(t, status(t, s), "", one.Digest, "", false)
	// Nothing staged: upgrade of the booted image finds no update.
	if err := s.Upgrade(ctx, bootcsim.UpgradeOptions{DownloadOnly: true}); err != nil {
		t.Fatal(err)
	}
	expectEntries(t, status(t, s), "", one.Digest, "", false)
}

// TestSoftRebootRefusedWithoutSystemdSupport: on a base whose systemd
// cannot soft-reboot (NoSoftRebootFile), bootc reports even a
// configuration-only update, same kernel and arguments, not capable.
func TestSoftRebootRefusedWithoutSystemdSupport(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	old := strings.TrimPrefix(bootcsim.NoSoftRebootFile, "/")
	one := pushImage(t, reg, "strata/os:old-one", "1", map[string]string{"etc/motd": "one\n", old: ""})
	two := pushImage(t, reg, "strata/os:old-two", "2", map[string]string{"etc/motd": "two\n", old: ""})
	s, _ := newNode(t)
	if err := s.Init(ctx, one.Ref); err != nil {
		t.Fatal(err)
	}
	_, err := s.Switch(ctx, two.Ref, bootcsim.SwitchOptions{Apply: true, SoftReboot: bootc.SoftRebootRequired})
	if err == nil || !strings.Contains(err.Error(), "not soft-reboot capable") {
		t.Fatalf("switch --soft-reboot=required: %v, want bootc's refusal", err)
	}
	if h := status(t, s); h.Status.Staged == nil || h.Status.Staged.SoftRebootCapable {
		t.Fatalf("staged %+v, want it staged and not soft-reboot capable", h.Status.Staged)
	}
}
