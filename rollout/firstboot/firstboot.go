package firstboot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/imageref"
	"github.com/strata-dev/strata/rollout"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/bootcheck"
	"github.com/strata-dev/strata/rollout/hostfs"
)

// Files in Dir(stateDir).
const (
	dirName   = "firstboot"
	stateName = "state.json"
	// DoneName exists once the first boot is done; the unit's
	// ConditionPathExists skips it from then on.
	DoneName = "done"
)

// Dir is the first boot's directory in the daemon's state directory.
func Dir(stateDir string) string { return filepath.Join(stateDir, dirName) }

// Phases of the state file.
const (
	phaseRebooting = "rebooting"
	phaseFailed    = "failed"
)

// record is the first boot's state file.
type record struct {
	Image  string `json:"image"`
	Phase  string `json:"phase"`
	BootID string `json:"bootID,omitempty"`
	// Original is the image the node was installed with.
	Original string `json:"original,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Outcome is how a run ended.
type Outcome string

const (
	// Done: the node runs the image and is healthy; the kubelet may start.
	Done Outcome = "Done"
	// Rebooting: the reboot into the image was asked for.
	Rebooting Outcome = "Rebooting"
)

// Boot is one run of the first boot.
type Boot struct {
	Bootc   rollout.Bootc
	Machine rollout.Machine
	// Root is the host's root; AuthFile (a host path, "" for none) is the
	// pull secret the config server delivered.
	Root     *hostfs.Root
	AuthFile string
	// StateDir is the daemon's state directory (<host root>/var/lib/strata).
	StateDir string
	// Image is the pool's image, repo@sha256:....
	Image string
	// SignaturePolicy, for a pool that signs its images, is the policy
	// the node's imageSignaturePolicy annotation will carry: the switch
	// writes it (merged into the base's policy.json) and enforces it, as
	// the daemon's stage does, and an image it refuses fails the first
	// boot. Enforcing then runs the switch; nil means a plain switch.
	SignaturePolicy *v1alpha1.NodeSignaturePolicy
	Enforcing       EnforcingSwitch
	// HealthTimeout bounds the health gate after the reboot; HealthPoll
	// is how often it checks (5s when zero).
	HealthTimeout, HealthPoll time.Duration
	Log                       logr.Logger
}

// EnforcingSwitch is what a switch under the signature policy takes of
// bootc (bootc.Command): its options, and switch
// --enforce-container-sigpolicy.
type EnforcingSwitch interface {
	Capabilities(ctx context.Context) (bootc.Capabilities, error)
	SwitchWith(ctx context.Context, image string, o bootc.SwitchOptions) error
}

// Run takes one step of the table in doc.go. Rebooting means the caller
// waits for the reboot to end it.
func (b *Boot) Run(ctx context.Context) (Outcome, error) {
	if !imageref.ValidPinned(b.Image) {
		return "", fmt.Errorf("--image %q is not repository@sha256:<digest>: a node pulls by digest only", b.Image)
	}
	dir := Dir(b.StateDir)
	if _, err := os.Stat(filepath.Join(dir, DoneName)); err == nil {
		b.Log.Info("The first boot is done already")
		return Done, nil
	}
	rec, err := load(dir)
	if err != nil {
		return "", err
	}
	if rec.Phase == phaseFailed {
		return "", fmt.Errorf("the first boot failed: %s; the node stays out of the cluster (reinstall it)", rec.Reason)
	}
	host, err := b.Bootc.Status(ctx)
	if err != nil {
		return "", err
	}
	bootID, err := b.Machine.BootID()
	if err != nil {
		return "", err
	}
	want := bootc.DigestOf(b.Image)
	booted := host.Status.Booted.Digest()
	switch {
	case rec.Phase == phaseRebooting && rec.BootID == bootID:
		b.Log.Info("The node did not reboot: asking again", "bootID", bootID)
		return Rebooting, b.Machine.Reboot(ctx)
	case rec.Phase == phaseRebooting && booted != want:
		reason := fmt.Sprintf("image %s did not boot: the node booted %s", b.Image, host.Status.Booted.PullSpec())
		if why := bootcheck.Verdict(bootcheck.Dir(b.StateDir), want); why != "" {
			reason = fmt.Sprintf("image %s failed: %s; the node runs %s", b.Image, why, host.Status.Booted.PullSpec())
		}
		return "", b.fail(dir, rec, reason)
	case booted == want:
		if rec.Phase == phaseRebooting {
			// The boot check waits for this verdict, as for the daemon's.
			if err := bootcheck.MarkVerifying(bootcheck.Dir(b.StateDir), want); err != nil {
				return "", err
			}
		}
		if why := b.healthGate(ctx); why != "" {
			return "", b.fail(dir, rec, "the node is not healthy on "+b.Image+": "+why)
		}
		if rec.Phase == phaseRebooting {
			if err := bootcheck.MarkHealthy(bootcheck.Dir(b.StateDir), want); err != nil {
				return "", err
			}
		}
		original := rec.Original
		if original == "" {
			original = host.Status.Booted.PullSpec()
		}
		return Done, b.done(dir, original)
	}

	// Another image booted, nothing recorded: switch, as an update stages.
	if b.AuthFile != "" {
		data, err := b.Root.ReadFile(b.AuthFile)
		if err != nil {
			return "", fmt.Errorf("read the pull secret %s: %w", b.AuthFile, err)
		}
		if err := b.Root.WriteFile(rollout.AuthFile, data, 0o600, 0, 0); err != nil {
			return "", fmt.Errorf("write the pull secret for bootc: %w", err)
		}
	}
	b.Log.Info("Switching to the pool's image", "image", b.Image, "booted", host.Status.Booted.PullSpec(), "enforceSignatures", b.SignaturePolicy != nil)
	if err := b.switchToImage(ctx); err != nil {
		var refused *refusedError
		if errors.As(err, &refused) {
			return "", b.fail(dir, rec, refused.Error())
		}
		return "", err
	}
	if host, err = b.Bootc.Status(ctx); err != nil {
		return "", err
	}
	if got := host.Status.Staged.Digest(); got != want {
		return "", b.fail(dir, rec, fmt.Sprintf("bootc staged %q after switching to %s", got, b.Image))
	}
	if b.SignaturePolicy != nil && !host.Status.Staged.Verified() {
		return "", b.fail(dir, rec, fmt.Sprintf("bootc staged %s without verifying its signature", b.Image))
	}
	if err := bootcheck.WriteExpect(bootcheck.Dir(b.StateDir), want, b.HealthTimeout); err != nil {
		return "", err
	}
	rec = record{Image: b.Image, Phase: phaseRebooting, BootID: bootID, Original: host.Status.Booted.PullSpec()}
	if err := save(dir, rec); err != nil {
		return "", err
	}
	b.Log.Info("Rebooting into the pool's image", "image", b.Image)
	return Rebooting, b.Machine.Reboot(ctx)
}

// refusedError is a switch the signature policy refused, or could not
// be enforced for: no retry helps.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }

// switchToImage stages the pool's image: with the signature policy
// written and enforced where the pool signs, as the daemon's stage
// does (a new node is a path in too), else a plain switch.
func (b *Boot) switchToImage(ctx context.Context) error {
	if b.SignaturePolicy == nil {
		return b.Bootc.Switch(ctx, b.Image)
	}
	if b.Enforcing == nil {
		return errors.New("a signature policy and no bootc to enforce it with")
	}
	written, err := rollout.WriteSignaturePolicy(b.Root, *b.SignaturePolicy)
	if err != nil {
		return fmt.Errorf("signature policy: %w", err)
	}
	for _, p := range written {
		b.Log.Info("Wrote the signature policy", "path", p)
	}
	caps, err := b.Enforcing.Capabilities(ctx)
	if err != nil {
		return fmt.Errorf("read bootc's options: %w", err)
	}
	if !caps.EnforceSigPolicy {
		return &refusedError{fmt.Errorf("image %s not switched to: the pool signs its images and this bootc has no switch --enforce-container-sigpolicy to verify them", b.Image)}
	}
	if err := b.Enforcing.SwitchWith(ctx, b.Image, bootc.SwitchOptions{EnforceSigPolicy: true}); err != nil {
		if rollout.RefusedBySignature(err) {
			return &refusedError{fmt.Errorf("image %s refused by the signature policy: %w", b.Image, err)}
		}
		return err
	}
	return nil
}

// healthGate waits for the node's health check to pass, up to
// HealthTimeout; it returns why the node is unhealthy, or "".
func (b *Boot) healthGate(ctx context.Context) string {
	poll := b.HealthPoll
	if poll <= 0 {
		poll = 5 * time.Second
	}
	deadline := time.Now().Add(b.HealthTimeout)
	for {
		err := b.Machine.CheckHealth(ctx)
		if err == nil {
			return ""
		}
		if !time.Now().Add(poll).Before(deadline) {
			return err.Error()
		}
		b.Log.Info("Waiting for the node to be healthy", "why", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err().Error()
		case <-time.After(poll):
		}
	}
}

// done records the end of the first boot.
func (b *Boot) done(dir, original string) error {
	// The daemon's record: where a pool without an image takes the node
	// back to is the image it was installed with, not the pool's.
	r, err := rollout.LoadRecord(b.StateDir)
	if err != nil {
		return err
	}
	if r.OriginalImage == "" {
		r.OriginalImage = original
		if err := rollout.SaveRecord(b.StateDir, r); err != nil {
			return err
		}
	}
	if b.AuthFile != "" {
		if err := b.Root.Remove(b.AuthFile); err != nil {
			return fmt.Errorf("remove the first boot's pull secret: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, DoneName), []byte(b.Image+"\n"), 0o644); err != nil {
		return err
	}
	b.Log.Info("The first boot is done: the kubelet may start", "image", b.Image, "installedWith", original)
	return nil
}

func (b *Boot) fail(dir string, rec record, reason string) error {
	rec.Image, rec.Phase, rec.Reason = b.Image, phaseFailed, reason
	if err := save(dir, rec); err != nil {
		return errors.Join(errors.New(reason), err)
	}
	return fmt.Errorf("the first boot failed: %s; the node stays out of the cluster", reason)
}

func load(dir string) (record, error) {
	var r record
	data, err := os.ReadFile(filepath.Join(dir, stateName))
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("first boot state %s: %w", filepath.Join(dir, stateName), err)
	}
	return r, nil
}

// save writes the state file atomically.
func save(dir string, r record) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+stateName+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateName))
}
