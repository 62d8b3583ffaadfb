package vmbootc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Locked staging (bootc's --download-only): ostree-finalize-staged
// leaves a staged deployment alone at shutdown while
// /run/ostree/staged-deployment-locked exists ("Not finalizing; found
// /run/ostree/staged-deployment-locked" in the journal), so no reboot
// boots it; it is dropped at the next boot instead. Debian 12's
// libostree 2022.7 honours the file; its command line has no
// --lock-finalization, which only creates the file before staging. This
// bootc does the same: the file is created before `ostree admin deploy
// --stage` writes /run/ostree/staged-deployment, so there is no moment
// at which an unlocked staged deployment of the image exists. Unlocking
// is removing the file, as rpm-ostree's finalize-deployment does.

// ErrNoStaged is the refusal of --from-downloaded when nothing is staged.
var ErrNoStaged = errors.New("No staged deployment found") //nolint:staticcheck // bootc-like message

func (s *System) lockFile() string { return filepath.Join(s.Run, stagedLockedFile) }

// stagedLocked says whether the finalization lock exists.
func (s *System) stagedLocked() (bool, error) {
	_, err := os.Stat(s.lockFile())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// lockStaging creates the finalization lock; created says whether this
// call created it (and so must remove it when staging fails).
func (s *System) lockStaging() (created bool, err error) {
	locked, err := s.stagedLocked()
	if err != nil || locked {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(s.lockFile()), 0o755); err != nil {
		return false, err
	}
	f, err := os.OpenFile(s.lockFile(), os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return false, err
	}
	return true, f.Close()
}

// unlockStaging removes the finalization lock: the next shutdown
// finalizes the staged deployment.
func (s *System) unlockStaging() error {
	if err := os.Remove(s.lockFile()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// UpgradeOptions are the options of `bootc upgrade` this bootc has: only
// those that lock and unlock the staged deployment.
type UpgradeOptions struct {
	// DownloadOnly locks the staged deployment.
	DownloadOnly bool
	// FromDownloaded unlocks it.
	FromDownloaded bool
}

// Upgrade is `bootc upgrade --download-only` or `--from-downloaded`.
// bootc's upgrade fetches the spec's image; this bootc switches by
// digest only, so the spec's image is the staged one (or the booted one
// when nothing is staged) and upgrade has nothing to fetch: with
// --download-only it locks the staged deployment, with --from-downloaded
// it unlocks it.
func (s *System) Upgrade(ctx context.Context, o UpgradeOptions) error {
	if o.DownloadOnly == o.FromDownloaded {
		return errors.New("upgrade is implemented only with --download-only or --from-downloaded by this bootc (test/vmbootc): use switch IMAGE@DIGEST")
	}
	v, unlock, err := s.lockBooted()
	if err != nil {
		return err
	}
	defer unlock()
	if o.FromDownloaded {
		return s.applyDownloaded(v, "")
	}
	if v.staged == nil {
		fmt.Fprintln(s.out(), "No update available.")
		return nil
	}
	if _, err := s.lockStaging(); err != nil {
		return err
	}
	fmt.Fprintf(s.out(), "Staged update present, locked: %s\n", v.staged.Origin.Image)
	return nil
}

// applyDownloaded unlocks the staged deployment (of image, when not "").
func (s *System) applyDownloaded(v *view, image string) error {
	if v.staged == nil {
		return ErrNoStaged
	}
	if image != "" && v.staged.Origin.Image != image {
		return fmt.Errorf("the staged deployment is %s, not %s", v.staged.Origin.Image, image)
	}
	locked, err := s.stagedLocked()
	if err != nil {
		return err
	}
	if !locked {
		fmt.Fprintln(s.out(), "Staged deployment is already unlocked.")
		return nil
	}
	if err := s.unlockStaging(); err != nil {
		return err
	}
	fmt.Fprintf(s.out(), "Unlocked the staged deployment: %s boots next\n", v.staged.Origin.Image)
	return nil
}

// ApplyDownloaded is `bootc switch --from-downloaded` without a target:
// the staged deployment, whatever its image, is unlocked.
func (s *System) ApplyDownloaded(ctx context.Context) error {
	v, unlock, err := s.lockBooted()
	if err != nil {
		return err
	}
	defer unlock()
	return s.applyDownloaded(v, "")
}
