// Package bootcheck is the node-side half of a rollback that needs no
// cluster: every image Strata builds carries a systemd unit that runs
// boot-check.sh at boot. When the node boots the image the daemon staged
// and the daemon does not report it healthy within the pool's health
// check timeout (an image that breaks the kubelet, the network or the
// daemon itself), the script runs `bootc rollback` and reboots, once.
//
// The script and the daemon talk through files in one directory on /var
// (Dir on a node), which survives reboots and rollbacks: the daemon
// writes what it expects before the reboot (WriteExpect), says when it
// verifies (MarkVerifying) and when the node is healthy (MarkHealthy);
// the script leaves its verdict, which the daemon reports (Verdict). The
// script is a shell script that uses only bootc, systemctl and what
// every bootc base has (coreutils, sed, grep), so that it works whatever
// else the image broke; the daemon, a pod, need not be on the host. The test
// simulator runs the same script, with its own bootc and systemctl on
// PATH.
package bootcheck

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Script is boot-check.sh, installed at ScriptPath in every image.
//
//go:embed boot-check.sh
var Script []byte

// Unit is the systemd unit that runs Script at every boot.
//
//go:embed strata-boot-check.service
var Unit []byte

// Where an image carries the boot check. The unit is enabled by the
// wants link under /usr, as a preset would, so that no build step has to
// run systemctl.
const (
	ScriptPath   = "/usr/lib/strata/boot-check"
	UnitName     = "strata-boot-check.service"
	UnitPath     = "/usr/lib/systemd/system/" + UnitName
	WantsPath    = "/usr/lib/systemd/system/multi-user.target.wants/" + UnitName
	WantsTarget  = "../" + UnitName
	DirEnv       = "STRATA_BOOT_CHECK_DIR"
	PollEnv      = "STRATA_BOOT_CHECK_POLL"
	expectName   = "expect"
	verifyName   = "verifying"
	healthyName  = "healthy"
	bootsName    = "boots"
	verdictName  = "verdict"
	stateDirName = "boot-check"
)

// Dir is the boot check's directory under the daemon's state directory
// (/var/lib/strata on a node).
func Dir(stateDir string) string { return filepath.Join(stateDir, stateDirName) }

// WriteExpect starts a new check, before the reboot into digest: the
// files of the last one go, so that its verdict is not taken for this
// one's. timeout is the pool's health check timeout.
func WriteExpect(dir, digest string, timeout time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("boot check: %w", err)
	}
	for _, name := range []string{verifyName, healthyName, bootsName, verdictName} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("boot check: %w", err)
		}
	}
	secs := max(int(timeout.Round(time.Second)/time.Second), 1)
	return write(dir, expectName, fmt.Sprintf("digest=%s\ntimeout=%d\n", digest, secs))
}

// MarkVerifying tells the script that the daemon runs and verifies the
// boot of digest itself.
func MarkVerifying(dir, digest string) error { return write(dir, verifyName, digest+"\n") }

// MarkHealthy tells the script that the daemon found the node healthy on
// digest: nothing to roll back.
func MarkHealthy(dir, digest string) error { return write(dir, healthyName, digest+"\n") }

// Verdict is why the script rolled the node back from digest, or "" when
// it did not.
func Verdict(dir, digest string) string {
	b, err := os.ReadFile(filepath.Join(dir, verdictName))
	if err != nil {
		return ""
	}
	d, why, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok || d != digest {
		return ""
	}
	return why
}

// write replaces dir/name atomically and durably: the node may lose power
// right after, and the script must read the whole file or none.
func write(dir, name, content string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("boot check: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return fmt.Errorf("boot check: %w", err)
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("boot check: write %s: %w", name, err)
	}
	return nil
}
