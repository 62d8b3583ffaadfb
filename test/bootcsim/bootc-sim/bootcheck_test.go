package main

import (
	"archive/tar"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/rollout/bootcheck"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/testregistry"
)

// asMain makes the test binary run as bootc-sim: the boot check script
// runs it as its bootc.
const asMain = "BOOTC_SIM_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// TestBootCheckOnTheSimulator (issue 20 point 9): the boot check an image
// carries, run by the simulated node at the boot of that image with the
// simulator as bootc, rolls the node back when no daemon reports it
// healthy, and the reboot it asks for boots the previous image; run again
// on that boot, it does nothing.
func TestBootCheckOnTheSimulator(t *testing.T) {
	reg := testregistry.Start(t, "")
	ref1, _ := pushImage(t, reg, "strata/bc:1", map[string]string{"etc/bc.conf": "1\n"})
	layer := testregistry.TarLayer(t, func(tw *tar.Writer) error {
		for _, h := range []*tar.Header{
			{Name: "usr/lib/strata/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: strings.TrimPrefix(bootcheck.ScriptPath, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bootcheck.Script))},
			{Name: "usr/lib/systemd/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: "usr/lib/systemd/system/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: strings.TrimPrefix(bootcheck.UnitPath, "/"), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(bootcheck.Unit))},
			{Name: "usr/lib/systemd/system/multi-user.target.wants/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: strings.TrimPrefix(bootcheck.WantsPath, "/"), Typeflag: tar.TypeSymlink, Mode: 0o777, Linkname: bootcheck.WantsTarget},
		} {
			h.ModTime = time.Unix(0, 0)
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			switch "/" + h.Name {
			case bootcheck.ScriptPath:
				_, _ = tw.Write(bootcheck.Script)
			case bootcheck.UnitPath:
				_, _ = tw.Write(bootcheck.Unit)
			}
		}
		return nil
	})
	img, err := mutate.AppendLayers(testregistry.Busybox(t), layer)
	if err != nil {
		t.Fatal(err)
	}
	ref2 := reg.Push(t, "strata/bc:2", img)
	_, digest2, _ := strings.Cut(ref2, "@")

	root := filepath.Join(t.TempDir(), "node")
	t.Cleanup(func() {
		if err := bootcsim.Cleanup(root); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	sr := "--sim-root=" + root
	mustCLI(t, sr, "sim", "init", ref1)
	mustCLI(t, sr, "switch", "--transport", "registry", "--", ref2)
	// What the daemon writes before its reboot.
	dir := bootcheck.Dir(filepath.Join(root, "var", "lib", "strata"))
	if err := bootcheck.WriteExpect(dir, digest2, time.Second); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, sr, "sim", "reboot")

	// systemd's part: bootc and systemctl on PATH, the image's script.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for name, body := range map[string]string{
		"bootc":     "exec '" + self + "' \"$@\"\n",
		"systemctl": "[ \"$*\" = reboot ] && exec '" + self + "' sim request-reboot\nexit 1\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runCheck := func(script string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script)
		cmd.Env = append(os.Environ(), asMain+"=1", "BOOTC_SIM_ROOT="+root,
			"PATH="+bin+":"+os.Getenv("PATH"), bootcheck.DirEnv+"="+dir, bootcheck.PollEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("boot check: %v: %s", err, out)
		}
		return string(out)
	}
	out := runCheck(filepath.Join(root, bootcheck.ScriptPath))
	h := decodeStrict(t, []byte(mustCLI(t, sr, "status", "--format=json")))
	if !h.Status.RollbackQueued || h.Status.Booted.Image.ImageDigest != digest2 {
		t.Fatalf("after the boot check: rollback queued %v, booted %s\n%s", h.Status.RollbackQueued, h.Status.Booted.Image.ImageDigest, out)
	}
	if _, err := os.Stat(filepath.Join(root, ".bootc-sim", "reboot-requested")); err != nil {
		t.Fatalf("no reboot requested: %v\n%s", err, out)
	}
	if v := bootcheck.Verdict(dir, digest2); !strings.Contains(v, "never started verifying") {
		t.Errorf("verdict %q", v)
	}

	mustCLI(t, sr, "sim", "reboot")
	h = decodeStrict(t, []byte(mustCLI(t, sr, "status", "--format=json")))
	if h.Status.Booted.Image.Image.Image != ref1 {
		t.Fatalf("booted %s after the boot check's reboot, want %s", h.Status.Booted.Image.Image.Image, ref1)
	}
	// Image one has no boot check; image two's, run on this boot anyway,
	// finds another image booted and leaves it.
	if err := os.Remove(filepath.Join(root, ".bootc-sim", "reboot-requested")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "boot-check")
	if err := os.WriteFile(script, bootcheck.Script, 0o755); err != nil {
		t.Fatal(err)
	}
	runCheck(script)
	h = decodeStrict(t, []byte(mustCLI(t, sr, "status", "--format=json")))
	if h.Status.RollbackQueued {
		t.Error("the boot check rolled back from the previous image")
	}
	if _, err := os.Stat(filepath.Join(root, ".bootc-sim", "reboot-requested")); err == nil {
		t.Error("the boot check asked for a reboot on the previous image")
	}
}
