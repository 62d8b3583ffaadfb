package vmbootc_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-dev/strata/test/testregistry"
	"github.com/strata-dev/strata/test/vmbootc"
)

// asBootc makes the test binary the bootc command line of the System the
// environment names, so that a shell script can run it as bootc.
const asBootc = "VMBOOTC_TEST_AS_BOOTC"

func TestMain(m *testing.M) {
	if os.Getenv(asBootc) == "1" {
		sys := &vmbootc.System{Sysroot: os.Getenv("VMBOOTC_SYSROOT"), Root: os.Getenv("VMBOOTC_ROOT"), Run: os.Getenv("VMBOOTC_RUN")}
		os.Exit(vmbootc.Main(context.Background(), sys, os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestBootCheckRollsBackWithThisBootc runs the node-local boot check
// (rollout/bootcheck/boot-check.sh) against this bootc on a sysroot that
// booted an image the daemon never reported healthy: the script reads the
// booted digest out of this status JSON with sed and grep, so the JSON's
// shape is what is checked, and its rollback must queue the previous
// image.
func TestBootCheckRollsBackWithThisBootc(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "s3cret")
	base := baseImage(t)
	one := push(t, reg, "strata/os:one", "1", base, map[string]string{"etc/motd": "one\n"})
	two := push(t, reg, "strata/os:two", "2", base, map[string]string{"etc/motd": "two\n"})
	n := install(t, reg, one)
	n.mustBootc("switch", two.Ref)
	n.boot()

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, check, calls := filepath.Join(dir, "bin"), filepath.Join(dir, "boot-check"), filepath.Join(dir, "calls")
	for _, d := range []string{bin, check} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stubs := map[string]string{
		"bootc":     "echo \"bootc $*\" >>" + calls + "\nexec env " + asBootc + "=1 VMBOOTC_SYSROOT=" + n.sys.Sysroot + " VMBOOTC_ROOT=" + n.sys.Root + " VMBOOTC_RUN=" + n.sys.Run + " " + self + " \"$@\"\n",
		"systemctl": "echo \"systemctl $*\" >>" + calls + "\n",
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The daemon expected two to be healthy within 0 s and never said so.
	if err := os.WriteFile(filepath.Join(check, "expect"), []byte("digest="+two.Digest+"\ntimeout=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "../../rollout/bootcheck/boot-check.sh")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STRATA_BOOT_CHECK_DIR="+check, "STRATA_BOOT_CHECK_POLL=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("boot-check.sh: %v\n%s", err, out)
	}
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(data); !strings.Contains(got, "bootc rollback\nsystemctl reboot\n") {
		t.Fatalf("the boot check did not roll back and reboot; calls:\n%s", got)
	}
	verdict, err := os.ReadFile(filepath.Join(check, "verdict"))
	if err != nil || !strings.HasPrefix(string(verdict), two.Digest+" boot check:") {
		t.Errorf("verdict %q, %v", verdict, err)
	}
	h := n.status()
	if !h.Status.RollbackQueued || h.Status.Rollback.Digest() != one.Digest || h.Status.Booted.Digest() != two.Digest {
		t.Errorf("after the boot check: %+v", h.Status)
	}
}
