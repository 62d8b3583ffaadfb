package bootcsim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/strata-dev/strata/rollout/bootc"
)

// RebootKind is what a reboot request asks the harness for; it is the
// request file's content.
type RebootKind string

const (
	// RebootFull is a reboot: a new kernel, a new boot id.
	RebootFull RebootKind = "reboot"
	// RebootSoft is systemd's soft-reboot: userspace restarts into the
	// prepared deployment, the kernel and the boot id stay.
	RebootSoft RebootKind = "soft-reboot"
)

// RebootRequest is the kind of reboot requested since the last boot, if
// one was. A request file of an older simulator (any other content) is
// a full reboot.
func (s *Sim) RebootRequest() (kind RebootKind, ok bool, err error) {
	data, err := os.ReadFile(s.RebootRequestFile())
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if RebootKind(strings.TrimSpace(string(data))) == RebootSoft {
		return RebootSoft, true, nil
	}
	return RebootFull, true, nil
}

func checkSoftRebootMode(m bootc.SoftRebootMode) error {
	switch m {
	case bootc.SoftRebootNone, bootc.SoftRebootAuto, bootc.SoftRebootRequired:
		return nil
	}
	return fmt.Errorf("invalid soft reboot mode %q: want %s or %s", m, bootc.SoftRebootRequired, bootc.SoftRebootAuto)
}

// NoSoftRebootFile, under /usr of a deployment, stands for a systemd
// without soft-reboot (older than 254: no soft-reboot.target): bootc
// reports no deployment soft-reboot capable while such a system is
// booted, or for a deployment that has one. An e2e builds a base with it
// to stand for a base on which soft reboot is impossible.
const NoSoftRebootFile = "/usr/lib/strata-sim/systemd-without-soft-reboot"

// softRebootCapable is bootc's softRebootCapable for d: relative to the
// booted deployment (which is no target of its own), systemd able to
// soft-reboot in both (see NoSoftRebootFile), the same kernel and
// initramfs (ostree's bootcsum, in the boot loader entry) and the same
// kernel arguments. The arguments are compared as bootc 1.16 does, which
// misses a change of the image's kargs.d (bootc issue 1350): those the
// images' kargs.d files contribute are left out on both sides, so a
// kargs.d-only change still reports capable, and the daemon must not
// rely on the flag for kernel arguments. There is no SELinux policy to
// compare.
func softRebootCapable(st *state, v *view, d *deployment) bool {
	b := v.booted
	if d == nil || b == nil || d.Name == b.Name || d.Kernel != b.Kernel {
		return false
	}
	for _, dep := range []*deployment{b, d} {
		if _, err := os.Lstat(filepath.Join(dep.Dir, NoSoftRebootFile)); err == nil {
			return false
		}
	}
	return slices.Equal(localKargs(st, d), localKargs(st, b))
}

// localKargs are d's kernel arguments less those of its image's kargs.d.
func localKargs(st *state, d *deployment) []string {
	image := st.Images[d.Checksum].Kargs
	var out []string
	for _, k := range d.Kargs {
		if !slices.Contains(image, k) {
			out = append(out, k)
		}
	}
	return out
}

func (s *Sim) nextRootFile() string { return filepath.Join(s.Root, "run", nextRootName) }

// finishStage does what bootc does after staging (or unlocking) a
// deployment: with a soft reboot mode, it prepares the soft reboot when
// the staged deployment is capable ("required" fails when it is not,
// the deployment staying staged); with apply, it reboots, softly when
// prepared.
func (s *Sim) finishStage(_ context.Context, st *state, mode bootc.SoftRebootMode, apply bool) error {
	v, err := s.view(st)
	if err != nil {
		return err
	}
	prepared := false
	if mode != bootc.SoftRebootNone {
		switch {
		case v.staged != nil && softRebootCapable(st, v, v.staged):
			fmt.Fprintln(s.out(), "Staged deployment is soft-reboot capable, preparing for soft-reboot...")
			if err := os.MkdirAll(filepath.Dir(s.nextRootFile()), 0o755); err != nil {
				return err
			}
			if err := writeFileAtomic(s.nextRootFile(), []byte(v.staged.Name+"\n"), 0o644); err != nil {
				return err
			}
			prepared = true
		case mode == bootc.SoftRebootRequired:
			return errors.New("Soft reboot was required but staged deployment is not soft-reboot capable") //nolint:staticcheck // bootc's own message
		}
	}
	if !apply {
		return nil
	}
	if prepared {
		return s.RequestSoftReboot()
	}
	return s.RequestReboot()
}

// UpgradeOptions are the options of `bootc upgrade` the simulator takes.
type UpgradeOptions struct {
	// DownloadOnly stages the update locked, or locks the staged
	// deployment when it is the update already.
	DownloadOnly bool
	// FromDownloaded unlocks the staged deployment without fetching.
	FromDownloaded bool
	// Apply and SoftReboot are as for switch.
	Apply      bool
	SoftReboot bootc.SoftRebootMode
}

// Upgrade is `bootc upgrade`: fetch the spec's image (the staged one's,
// else the booted one's) and stage it when it is new. When the staged
// deployment is that image already, --download-only locks it and
// anything else unlocks it. --from-downloaded only unlocks the staged
// deployment, whatever staged it.
func (s *Sim) Upgrade(ctx context.Context, o UpgradeOptions) error {
	if o.DownloadOnly && (o.Apply || o.FromDownloaded) {
		return errors.New("--download-only cannot be used with --apply or --from-downloaded")
	}
	if err := checkSoftRebootMode(o.SoftReboot); err != nil {
		return err
	}
	st, v, unlock, err := s.open()
	if err != nil {
		return err
	}
	defer unlock()
	if o.FromDownloaded {
		if v.staged == nil {
			return errors.New("No staged deployment found") //nolint:staticcheck // bootc's own message
		}
		if err := s.setLocked(v, false); err != nil {
			return err
		}
		return s.finishStage(ctx, st, o.SoftReboot, o.Apply)
	}
	spec := v.origins[v.booted.Name]
	if v.staged != nil {
		spec = v.origins[v.staged.Name]
	}
	// A spec switched to with --enforce-container-sigpolicy is fetched
	// under the policy again (--from-downloaded above fetches nothing
	// and verifies nothing).
	if spec.Verified {
		if err := s.verifySigPolicy(ctx, spec.Image); err != nil {
			return err
		}
	}
	p, err := s.pull(ctx, st, spec.Image)
	if err != nil {
		return err
	}
	switch {
	case v.staged != nil && p.Checksum == v.staged.Checksum:
		if err := s.setLocked(v, o.DownloadOnly); err != nil {
			return err
		}
		return s.finishStage(ctx, st, o.SoftReboot, o.Apply)
	case p.Checksum == v.booted.Checksum:
		fmt.Fprintln(s.out(), "No update available.")
		return nil
	}
	if err := s.stage(ctx, st, v, spec.Image, o.DownloadOnly, spec.Verified); err != nil {
		return err
	}
	return s.finishStage(ctx, st, o.SoftReboot, o.Apply)
}

// setLocked locks or unlocks the staged deployment's finalization.
func (s *Sim) setLocked(v *view, locked bool) error {
	o := v.origins[v.staged.Name]
	switch {
	case o.Locked == locked:
		if locked {
			fmt.Fprintln(s.out(), "Staged update present, not changed")
		} else {
			fmt.Fprintln(s.out(), "Staged deployment is already set to apply on reboot")
		}
		return nil
	case locked:
		fmt.Fprintln(s.out(), "Image downloaded, but will not be applied on reboot")
	default:
		fmt.Fprintln(s.out(), "Staged deployment will now be applied on reboot")
	}
	o.Locked = locked
	return writeOrigin(*v.staged, o)
}

// SoftReboot simulates systemd's soft-reboot: userspace stops and starts
// again, the kernel stays, so the boot id does too and SoftRebootsCount
// goes up. With a soft reboot prepared (bootc --soft-reboot), the staged
// deployment is finalized and userspace starts in it; /run stays, less
// the consumed preparation. Without one, userspace starts again in the
// booted deployment. A staged deployment that was not prepared is
// refused: what systemd and ostree would then make of it is not
// simulated.
func (s *Sim) SoftReboot(ctx context.Context) error {
	st, v, unlock, err := s.open()
	if err != nil {
		return err
	}
	defer unlock()
	data, err := os.ReadFile(s.nextRootFile())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	prepared := strings.TrimSpace(string(data))
	next := *v.booted
	switch {
	case prepared != "":
		if v.staged == nil || v.staged.Name != prepared {
			return fmt.Errorf("the prepared soft reboot targets %s, which is not the staged deployment any more", prepared)
		}
		if v.origins[v.staged.Name].Locked {
			return errors.New("the staged deployment is locked (download-only): unlock it first")
		}
		if next, err = s.finalize(ctx, v); err != nil {
			return err
		}
	case v.staged != nil:
		return errors.New("soft reboot with a staged deployment that bootc did not prepare for it: not simulated")
	}
	st.Booted = next.Name
	st.SoftReboots++
	if err := s.saveState(st); err != nil {
		return err
	}
	if err := s.prune(ctx, 2); err != nil {
		return err
	}
	if err := s.gcRefs(ctx, st); err != nil {
		return err
	}
	if err := s.saveState(st); err != nil {
		return err
	}
	if err := s.linkRoot(next); err != nil {
		return err
	}
	for _, f := range []string{s.nextRootFile(), s.RebootRequestFile()} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// SoftReboots is systemd's SoftRebootsCount on the node: soft reboots
// since the last full boot.
func (s *Sim) SoftReboots() (int, error) {
	st, err := s.loadState()
	if err != nil {
		return 0, err
	}
	return st.SoftReboots, nil
}
