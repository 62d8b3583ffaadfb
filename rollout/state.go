package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// StateFile is the name of the daemon's state file in its state
// directory. The directory is on /var, which survives reboots and
// rollbacks, so the record of an update in progress outlives the boot
// that started it.
const StateFile = "state.json"

// Phase is how far an update got past the drain (doc.go has the table).
// The values are the state file's format: a daemon upgraded mid-update
// reads the file the old one wrote, so they are never renamed.
type Phase string

const (
	// PhaseRebooting (recordReboot): the items are written and the
	// reboot into the new image was asked for from boot BootID.
	PhaseRebooting Phase = "rebooting"
	// PhaseVerifying (startVerify): the node booted again; the daemon
	// waits for the desired digest to be booted and healthy.
	PhaseVerifying Phase = "verifying"
	// PhaseRollingBack (recordRollback): verification failed; `bootc
	// rollback` and a reboot are asked for from boot BootID.
	PhaseRollingBack Phase = "rollingBack"
	// PhaseFailed (reject, failDidNotBoot, failRolledBack): the update is
	// over and failed; the daemon never tries the same key again.
	PhaseFailed Phase = "failed"
)

// Record is the daemon's state file.
type Record struct {
	// OriginalImage is the image the node booted when the daemon first
	// ran on it (repo@digest), recorded once.
	OriginalImage string `json:"originalImage,omitempty"`
	// CurrentConfig and CurrentImage are those of the last completed
	// update.
	CurrentConfig string `json:"currentConfig,omitempty"`
	CurrentImage  string `json:"currentImage,omitempty"`
	// Skipped are the node items the last completed update left alone,
	// reported in the reason.
	Skipped []string `json:"skipped,omitempty"`
	// Update is the update past its drain, or the last one that failed.
	Update *UpdateRecord `json:"update,omitempty"`
	// Disruption is the decision taken for the latest image update, once
	// its image was staged.
	Disruption *DisruptionRecord `json:"disruption,omitempty"`
	// LivePaths are the /etc paths written live since the node booted
	// the image its /etc follows, recorded before they are written. At
	// the next boot ostree merges /etc from the booted deployment, for
	// which they are local modifications: before the daemon reboots into
	// another image it writes them as that image has them (see
	// resyncLive), and a completed update clears them.
	LivePaths []string `json:"livePaths,omitempty"`
	// DrainFailed is the drain request whose failure, the controller's
	// verdict in drainFailure, the daemon reported as Degraded; recorded
	// before the report. A node Degraded with that drain still asked for
	// and no verdict is then the daemon's own report, its verdict
	// removed by a person to have the drain tried again, and not an
	// older controller's verdict, written as the state itself.
	DrainFailed string `json:"drainFailed,omitempty"`
}

// UpdateRecord is one update of the node to a desired image and config.
type UpdateRecord struct {
	// Key names the update: UpdateKey(Image, Config).
	Key    string `json:"key"`
	Image  string `json:"image"`
	Config string `json:"config"`
	Phase  Phase  `json:"phase"`
	// BootID is the boot the last reboot was asked from; another boot id
	// means the reboot happened.
	BootID string `json:"bootID,omitempty"`
	// From is the digest the node booted when the update's reboot was
	// asked for: what a rollback must go back to ("" from a daemon
	// before it was recorded).
	From string `json:"from,omitempty"`
	// Soft is set when the reboot is a soft one (the disruption
	// decision), which keeps the boot id: SoftReboots, systemd's count
	// before it, going up means it happened.
	Soft        bool `json:"soft,omitempty"`
	SoftReboots int  `json:"softReboots,omitempty"`
	// VerifyStarted is when the daemon first saw the node booted after
	// the update's reboot: the health check timeout counts from there,
	// across restarts of the daemon.
	VerifyStarted *time.Time `json:"verifyStarted,omitempty"`
	// Skipped are the node items left alone.
	Skipped []string `json:"skipped,omitempty"`
	// Failure says why verification failed.
	Failure string `json:"failure,omitempty"`
	// RollbackIssued is set once `bootc rollback` succeeded.
	RollbackIssued bool `json:"rollbackIssued,omitempty"`
	// Reason is the Degraded reason of a failed update.
	Reason string `json:"reason,omitempty"`
}

// LoadRecord reads the state file in dir; a missing file is an empty
// record.
func LoadRecord(dir string) (*Record, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return &Record{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("parse state file %s: %w", filepath.Join(dir, StateFile), err)
	}
	return &r, nil
}

// SaveRecord replaces the state file in dir atomically: a temporary file,
// fsync, rename, fsync of the directory, so that a crash leaves the old
// record or the new one.
func SaveRecord(dir string, r *Record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+StateFile+".*")
	if err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, StateFile)); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	done = true
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	return nil
}
