package rollout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/nodeconfig"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/hostfs"
)

// AuthFile is where the daemon writes the pull secret on the host: the
// first place bootc looks, and gone at reboot.
const AuthFile = "/run/ostree/auth.json"

// DefaultHealthCheckTimeout applies when the node has no
// healthCheckTimeout annotation.
const DefaultHealthCheckTimeout = 10 * time.Minute

// maxReason keeps the reason annotation readable in kubectl output.
const maxReason = 1024

// healthPoll is how often the health of a freshly booted node is checked
// while its timeout runs.
const healthPoll = 5 * time.Second

// UpdateKey names an update in the drain handshake: the first 16 hex
// characters of sha256(image + "\n" + config).
func UpdateKey(image, config string) string {
	sum := sha256.Sum256([]byte(image + "\n" + config))
	return hex.EncodeToString(sum[:])[:16]
}

// Result is what a sync asks of its caller.
type Result struct {
	// Rebooting means the reboot was asked for: the caller must take no
	// further step and wait to be killed by the reboot.
	Rebooting bool
	// RequeueAfter asks for another sync this soon; 0 means at the next
	// event or resync.
	RequeueAfter time.Duration
}

// Daemon takes a node through updates. Its exported fields are set
// before the first Sync; one Sync runs at a time.
type Daemon struct {
	// Client reads the Node (a cache restricted to it is fine) and
	// patches its annotations.
	Client client.Client
	// Reader reads MachineConfigs and Secrets uncached; nil means
	// Client.
	Reader client.Reader
	// Recorder, if set, records Events on the Node.
	Recorder events.EventRecorder
	// NodeName is the daemon's own node.
	NodeName string
	// Namespace holds the pull secrets.
	Namespace string
	// Root is the host's root directory.
	Root *hostfs.Root
	// StateDir holds the state file.
	StateDir string
	Bootc    Bootc
	Machine  Machine
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// started is set once the original image is recorded.
	started bool
	// authSecret is the pull secret name last written to AuthFile.
	authSecret *string
	// rebootRequested stops every step once the reboot command ran.
	rebootRequested bool
	// checkpoint, in tests, stops a sync after a step as a crash would;
	// crashed is then set, and the sync writes nothing more.
	checkpoint func(step string) error
	crashed    bool
}

// Steps a sync can stop after, for crash tests.
const (
	stepWorking           = "working"
	stepSwitched          = "switched"
	stepDrainRequested    = "drainRequested"
	stepItemsWritten      = "itemsWritten"
	stepRecorded          = "recorded"
	stepRebootingReported = "rebootingReported"
	stepRollbackRecorded  = "rollbackRecorded"
	stepRolledBack        = "rolledBack"
)

func (d *Daemon) step(name string) error {
	if d.checkpoint == nil {
		return nil
	}
	err := d.checkpoint(name)
	if err != nil {
		d.crashed = true
	}
	return err
}

func (d *Daemon) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Daemon) reader() client.Reader {
	if d.Reader != nil {
		return d.Reader
	}
	return d.Client
}

// RebootTimedOut lets syncs run again after a reboot that did not come:
// the next sync sees the same boot id and asks for the reboot again.
func (d *Daemon) RebootTimedOut() {
	d.rebootRequested = false
}

// scope is one sync's view of the world.
type scope struct {
	log    logr.Logger
	node   *corev1.Node
	host   *bootc.Host
	rec    *Record
	bootID string
	// set are the daemon's annotations to write, by key.
	set map[string]string
	// updating is set once the sync works on an update, so that an error
	// shows in the reason.
	updating bool
}

func (s *scope) annotation(key string) string {
	return s.node.Annotations[key]
}

// report asks for an annotation value; flush writes what differs.
func (s *scope) report(key, value string) {
	s.set[key] = value
}

// Sync takes the next steps of the node's update, as far as they go
// without waiting.
func (d *Daemon) Sync(ctx context.Context) (res Result, err error) {
	if d.rebootRequested {
		return Result{Rebooting: true}, nil
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("node", d.NodeName)
	ctx = logr.NewContext(ctx, log)
	s := &scope{log: log, node: &corev1.Node{}, set: map[string]string{}}
	if err := d.Client.Get(ctx, types.NamespacedName{Name: d.NodeName}, s.node); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("Waiting for the Node to exist")
			return Result{}, nil
		}
		return Result{}, fmt.Errorf("get node %s: %w", d.NodeName, err)
	}
	if s.host, err = d.Bootc.Status(ctx); err != nil {
		return Result{}, err
	}
	if s.host.Status.Booted.Digest() == "" {
		return Result{}, errors.New("bootc status shows no booted image: not a bootc host")
	}
	if s.bootID, err = d.Machine.BootID(); err != nil {
		return Result{}, err
	}
	if s.rec, err = LoadRecord(d.StateDir); err != nil {
		return Result{}, err
	}
	defer func() {
		if err != nil && s.updating && !d.rebootRequested && !d.crashed {
			// Best effort: the error may be the API server's.
			s.set = map[string]string{v1alpha1.ReasonAnnotation: clip(err.Error())}
			_ = d.flush(ctx, s)
		}
	}()
	if !d.started {
		if err := d.start(s); err != nil {
			return Result{}, err
		}
		d.started = true
	}
	// The pull secret goes to /run, which a reboot empties: written at
	// the first sync and whenever the node names another one. Only a
	// switch needs it, so a failure here waits for the switch.
	if err := d.ensureAuth(ctx, s, false); err != nil {
		log.Error(err, "Could not write the pull secret")
	}
	d.reportCurrent(s)
	res, err = d.next(ctx, s)
	if err != nil {
		return res, err
	}
	if !d.rebootRequested {
		if err := d.flush(ctx, s); err != nil {
			return res, err
		}
	}
	return res, nil
}

// start is the work of a daemon's first sync: the original image,
// recorded once.
func (d *Daemon) start(s *scope) error {
	if s.rec.OriginalImage != "" {
		return nil
	}
	s.rec.OriginalImage = s.annotation(v1alpha1.OriginalImageAnnotation)
	if s.rec.OriginalImage == "" {
		s.rec.OriginalImage = s.host.Status.Booted.PullSpec()
	}
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return err
	}
	s.log.Info("Recorded the original image", "image", s.rec.OriginalImage)
	return nil
}

// reportCurrent reports what the node runs, every sync.
func (d *Daemon) reportCurrent(s *scope) {
	if s.annotation(v1alpha1.OriginalImageAnnotation) == "" && s.rec.OriginalImage != "" {
		s.report(v1alpha1.OriginalImageAnnotation, s.rec.OriginalImage)
	}
	s.report(v1alpha1.CurrentImageAnnotation, s.host.Status.Booted.PullSpec())
	if s.rec.CurrentConfig != "" {
		s.report(v1alpha1.CurrentConfigAnnotation, s.rec.CurrentConfig)
	}
}

// ensureAuth writes the pull secret the node names to AuthFile, or
// removes the file when it names none. Unless refresh is set, a secret
// already written is not read again.
func (d *Daemon) ensureAuth(ctx context.Context, s *scope, refresh bool) error {
	name := s.annotation(v1alpha1.ImagePullSecretAnnotation)
	if !refresh && d.authSecret != nil && *d.authSecret == name {
		return nil
	}
	if name == "" {
		if err := d.Root.Remove(AuthFile); err != nil {
			return fmt.Errorf("remove %s: %w", AuthFile, err)
		}
		d.authSecret = &name
		return nil
	}
	var secret corev1.Secret
	if err := d.reader().Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: name}, &secret); err != nil {
		return fmt.Errorf("get pull secret %s/%s: %w", d.Namespace, name, err)
	}
	data, ok := secret.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return fmt.Errorf("pull secret %s/%s has no %s key", d.Namespace, name, corev1.DockerConfigJsonKey)
	}
	if old, err := d.Root.ReadFile(AuthFile); err != nil || !bytes.Equal(old, data) {
		if err := d.Root.WriteFile(AuthFile, data, 0o600, 0, 0); err != nil {
			return fmt.Errorf("write the pull secret: %w", err)
		}
		s.log.Info("Wrote the pull secret for bootc", "secret", name, "path", AuthFile)
	}
	d.authSecret = &name
	return nil
}

// flush merge-patches the node with the reported annotations that differ
// from its own; the patch carries only the daemon's annotations.
func (d *Daemon) flush(ctx context.Context, s *scope) error {
	changed := map[string]string{}
	for k, v := range s.set {
		if cur, ok := s.node.Annotations[k]; !ok || cur != v {
			changed[k] = v
		}
	}
	s.set = map[string]string{}
	if len(changed) == 0 {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": changed}})
	if err != nil {
		return err
	}
	if err := d.Client.Patch(ctx, s.node, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("patch node %s annotations: %w", d.NodeName, err)
	}
	return nil
}

// next decides and takes the next steps.
func (d *Daemon) next(ctx context.Context, s *scope) (Result, error) {
	image := s.annotation(v1alpha1.DesiredImageAnnotation)
	config := s.annotation(v1alpha1.DesiredConfigAnnotation)
	if image == "" {
		s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateDone)
		s.report(v1alpha1.ReasonAnnotation, "")
		return Result{}, nil
	}
	key := UpdateKey(image, config)
	s.log = s.log.WithValues("image", image, "config", config, "key", key)
	if dg := bootc.DigestOf(image); !strings.HasPrefix(dg, "sha256:") || len(dg) != len("sha256:")+64 {
		// Nodes pull by digest only: with a tag, neither booted nor
		// staged would ever match, and every sync would switch again.
		if u := s.rec.Update; u == nil || u.Key != key {
			return d.failInvalid(s, image, config, key, &invalidConfigError{
				what: "desired image " + image, err: errors.New("not a repo@sha256:<digest> pull spec")})
		}
	}
	if u := s.rec.Update; u != nil && u.Key == key {
		switch u.Phase {
		case PhaseFailed:
			d.reportFailed(s, u)
			return Result{}, nil
		case PhaseRebooting:
			s.updating = true
			if u.BootID == s.bootID {
				s.log.Info("The node did not reboot: asking again", "bootID", s.bootID)
				return d.reboot(ctx, s)
			}
			now := d.now().UTC()
			u.Phase, u.VerifyStarted = PhaseVerifying, &now
			if err := SaveRecord(d.StateDir, s.rec); err != nil {
				return Result{}, err
			}
			s.log.Info("Booted after the update's reboot", "bootID", s.bootID)
			return d.verify(ctx, s, u)
		case PhaseVerifying:
			s.updating = true
			return d.verify(ctx, s, u)
		case PhaseRollingBack:
			s.updating = true
			if u.BootID == s.bootID {
				return d.rollback(ctx, s, u)
			}
			return d.rolledBack(s, u)
		}
	}
	if bootc.DigestOf(image) == s.host.Status.Booted.Digest() {
		return d.configOnly(ctx, s, image, config, key)
	}
	return d.update(ctx, s, image, config, key)
}

// reportFailed reports a failed update, and asks for the uncordon: the
// node runs its old image and is healthy.
func (d *Daemon) reportFailed(s *scope, u *UpdateRecord) {
	s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded)
	s.report(v1alpha1.ReasonAnnotation, clip(u.Reason))
	s.report(v1alpha1.DesiredDrainAnnotation, v1alpha1.UncordonRequestPrefix+u.Key)
}

// items reads the desired rendered config and splits out the node items.
func (d *Daemon) items(ctx context.Context, config string) ([]nodeconfig.NodeItem, error) {
	if config == "" {
		return nil, nil
	}
	var mc v1alpha1.MachineConfig
	if err := d.reader().Get(ctx, types.NamespacedName{Name: config}, &mc); err != nil {
		return nil, fmt.Errorf("get rendered config %s: %w", config, err)
	}
	split, err := nodeconfig.SplitForNode(&mc.Spec)
	if err != nil {
		return nil, &invalidConfigError{what: "rendered config " + config, err: err}
	}
	return split.NodeItems, nil
}

// invalidConfigError is a desired image or rendered config the daemon
// cannot apply; retrying does not help.
type invalidConfigError struct {
	what string
	err  error
}

func (e *invalidConfigError) Error() string {
	return fmt.Sprintf("%s cannot be applied on the node: %v", e.what, e.err)
}

func (e *invalidConfigError) Unwrap() error { return e.err }

// failInvalid records an update whose config cannot be applied as failed.
func (d *Daemon) failInvalid(s *scope, image, config, key string, err error) (Result, error) {
	var inv *invalidConfigError
	if !errors.As(err, &inv) {
		return Result{}, err
	}
	s.rec.Update = &UpdateRecord{Key: key, Image: image, Config: config, Phase: PhaseFailed, Reason: inv.Error()}
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return Result{}, err
	}
	s.log.Info("The desired update cannot be applied", "error", inv.Error())
	d.event(s, corev1.EventTypeWarning, "InvalidConfig", "Update", "%s", inv.Error())
	d.reportFailed(s, s.rec.Update)
	return Result{}, nil
}

// writeItems writes the node items and returns those left alone.
func (d *Daemon) writeItems(s *scope, items []nodeconfig.NodeItem) ([]string, error) {
	skipped, err := d.Root.Apply(items)
	if err != nil {
		return nil, fmt.Errorf("write node items: %w", err)
	}
	for _, msg := range skipped {
		s.log.Info("Left a node item alone", "item", msg)
	}
	return skipped, nil
}

// configOnly applies a config on the image the node already runs: the
// node items, no drain, no reboot.
func (d *Daemon) configOnly(ctx context.Context, s *scope, image, config, key string) (Result, error) {
	rec := s.rec
	if rec.CurrentConfig != config || rec.CurrentImage != image {
		s.updating = true
		items, err := d.items(ctx, config)
		if err != nil {
			return d.failInvalid(s, image, config, key, err)
		}
		skipped, err := d.writeItems(s, items)
		if err != nil {
			return Result{}, err
		}
		rec.CurrentConfig, rec.CurrentImage, rec.Skipped, rec.Update = config, image, skipped, nil
		if err := SaveRecord(d.StateDir, rec); err != nil {
			return Result{}, err
		}
		s.log.Info("Applied the config without a reboot")
		d.event(s, corev1.EventTypeNormal, "Updated", "Update", "Applied config %s on image %s without a reboot", config, image)
	}
	s.report(v1alpha1.CurrentConfigAnnotation, config)
	s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateDone)
	s.report(v1alpha1.ReasonAnnotation, clip(strings.Join(rec.Skipped, "; ")))
	// A drain asked for an update this one replaced must not leave the
	// node cordoned.
	if strings.HasPrefix(s.annotation(v1alpha1.DesiredDrainAnnotation), v1alpha1.DrainRequestPrefix) {
		s.report(v1alpha1.DesiredDrainAnnotation, v1alpha1.UncordonRequestPrefix+key)
	}
	return Result{}, nil
}

// update takes an image update from its start to the reboot.
func (d *Daemon) update(ctx context.Context, s *scope, image, config, key string) (Result, error) {
	drain := v1alpha1.DrainRequestPrefix + key
	if s.annotation(v1alpha1.StateAnnotation) == v1alpha1.NodeStateDegraded &&
		s.annotation(v1alpha1.DesiredDrainAnnotation) == drain {
		// The controller gave up on the drain (drainTimeout) and left the
		// node cordoned: nothing more for this pair.
		s.log.V(1).Info("The drain failed: nothing to do for this update")
		return Result{}, nil
	}
	items, err := d.items(ctx, config)
	if err != nil {
		return d.failInvalid(s, image, config, key, err)
	}
	s.updating = true
	s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking)
	s.report(v1alpha1.ReasonAnnotation, "")
	if err := d.flush(ctx, s); err != nil {
		return Result{}, err
	}
	if err := d.step(stepWorking); err != nil {
		return Result{}, err
	}
	if bootc.DigestOf(image) != s.host.Status.Staged.Digest() {
		// Read the secret again: it may have been rotated.
		if err := d.ensureAuth(ctx, s, true); err != nil {
			return Result{}, err
		}
		s.log.Info("Staging the desired image")
		start := d.now()
		if err := d.Bootc.Switch(ctx, image); err != nil {
			return Result{}, err
		}
		s.log.Info("Staged the desired image", "seconds", d.now().Sub(start).Seconds())
		d.event(s, corev1.EventTypeNormal, "Staged", "Switch", "Staged image %s for the next boot", image)
		if err := d.step(stepSwitched); err != nil {
			return Result{}, err
		}
	}
	if s.annotation(v1alpha1.DesiredDrainAnnotation) != drain {
		s.report(v1alpha1.DesiredDrainAnnotation, drain)
		if err := d.flush(ctx, s); err != nil {
			return Result{}, err
		}
		s.log.Info("Asked for the drain", "desiredDrain", drain)
	}
	if err := d.step(stepDrainRequested); err != nil {
		return Result{}, err
	}
	if s.annotation(v1alpha1.LastAppliedDrainAnnotation) != drain {
		s.log.V(1).Info("Waiting for the drain", "desiredDrain", drain)
		return Result{}, nil
	}
	skipped, err := d.writeItems(s, items)
	if err != nil {
		return Result{}, err
	}
	if err := d.step(stepItemsWritten); err != nil {
		return Result{}, err
	}
	s.rec.Update = &UpdateRecord{Key: key, Image: image, Config: config, Phase: PhaseRebooting, BootID: s.bootID, Skipped: skipped}
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return Result{}, err
	}
	if err := d.step(stepRecorded); err != nil {
		return Result{}, err
	}
	return d.reboot(ctx, s)
}

// reboot reports Rebooting and runs the reboot command.
func (d *Daemon) reboot(ctx context.Context, s *scope) (Result, error) {
	s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateRebooting)
	if err := d.flush(ctx, s); err != nil {
		return Result{}, err
	}
	if err := d.step(stepRebootingReported); err != nil {
		return Result{}, err
	}
	s.log.Info("Rebooting", "bootID", s.bootID)
	d.event(s, corev1.EventTypeNormal, "Rebooting", "Reboot", "Rebooting into image %s", s.annotation(v1alpha1.DesiredImageAnnotation))
	d.rebootRequested = true
	if err := d.Machine.Reboot(ctx); err != nil {
		d.rebootRequested = false
		return Result{}, err
	}
	return Result{Rebooting: true}, nil
}

// healthCheckTimeout is the node's healthCheckTimeout annotation.
func (d *Daemon) healthCheckTimeout(s *scope) time.Duration {
	v := s.annotation(v1alpha1.HealthCheckTimeoutAnnotation)
	if v == "" {
		return DefaultHealthCheckTimeout
	}
	t, err := time.ParseDuration(v)
	if err != nil || t <= 0 {
		s.log.Info("Ignoring an invalid health check timeout", "healthCheckTimeout", v)
		return DefaultHealthCheckTimeout
	}
	return t
}

// health says why the node is unhealthy, or "" when it is healthy: its
// Ready condition is True and the health check passes.
func (d *Daemon) health(ctx context.Context, s *scope) string {
	var why []string
	ready := false
	for _, c := range s.node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
			if !ready {
				why = append(why, strings.TrimSpace(fmt.Sprintf("the node is not Ready (%s) %s", c.Reason, c.Message)))
			}
		}
	}
	if !ready && len(why) == 0 {
		why = append(why, "the node has no Ready condition")
	}
	if err := d.Machine.CheckHealth(ctx); err != nil {
		why = append(why, err.Error())
	}
	return strings.Join(why, "; ")
}

// verify checks the node after the update's reboot: the desired digest
// booted and healthy within the timeout completes the update; otherwise
// it is rolled back, once.
func (d *Daemon) verify(ctx context.Context, s *scope, u *UpdateRecord) (Result, error) {
	booted := s.host.Status.Booted
	if booted.Digest() != bootc.DigestOf(u.Image) {
		// The new deployment did not boot: the node already runs another
		// image, and a rollback would now select the failed one.
		u.Phase = PhaseFailed
		u.Reason = fmt.Sprintf("image %s did not boot: the node booted %s instead and keeps running it", u.Image, booted.PullSpec())
		if err := SaveRecord(d.StateDir, s.rec); err != nil {
			return Result{}, err
		}
		s.log.Info("The desired image did not boot", "booted", booted.PullSpec())
		d.event(s, corev1.EventTypeWarning, "UpdateFailed", "Verify", "%s", u.Reason)
		d.reportFailed(s, u)
		return Result{}, nil
	}
	timeout := d.healthCheckTimeout(s)
	why := d.health(ctx, s)
	if why == "" {
		// Write the items again: owner names that only the new image's
		// /etc/passwd knows resolve now. Apply is idempotent.
		items, err := d.items(ctx, u.Config)
		if err != nil && !errors.As(err, new(*invalidConfigError)) {
			return Result{}, err
		}
		skipped := u.Skipped
		if err == nil {
			if skipped, err = d.writeItems(s, items); err != nil {
				return Result{}, err
			}
		}
		rec := s.rec
		rec.CurrentConfig, rec.CurrentImage, rec.Skipped, rec.Update = u.Config, u.Image, skipped, nil
		if err := SaveRecord(d.StateDir, rec); err != nil {
			return Result{}, err
		}
		s.log.Info("Update verified", "booted", booted.PullSpec())
		d.event(s, corev1.EventTypeNormal, "Updated", "Verify", "Booted image %s healthy with config %s", u.Image, u.Config)
		s.report(v1alpha1.CurrentConfigAnnotation, u.Config)
		s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateDone)
		s.report(v1alpha1.ReasonAnnotation, clip(strings.Join(skipped, "; ")))
		s.report(v1alpha1.DesiredDrainAnnotation, v1alpha1.UncordonRequestPrefix+u.Key)
		return Result{}, nil
	}
	deadline := u.VerifyStarted.Add(timeout)
	if left := deadline.Sub(d.now()); left > 0 {
		s.log.Info("Waiting for the node to become healthy", "why", why, "secondsLeft", int(left.Seconds()))
		s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking)
		return Result{RequeueAfter: min(left, healthPoll)}, nil
	}
	u.Phase = PhaseRollingBack
	u.BootID = s.bootID
	u.Failure = fmt.Sprintf("image %s was not healthy within %s of its boot: %s", u.Image, timeout, why)
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return Result{}, err
	}
	s.log.Info("The update failed its health check: rolling back", "why", why)
	d.event(s, corev1.EventTypeWarning, "RollingBack", "Rollback", "%s; rolling back", u.Failure)
	if err := d.step(stepRollbackRecorded); err != nil {
		return Result{}, err
	}
	return d.rollback(ctx, s, u)
}

// rollback queues the rollback deployment, once, and reboots into it.
func (d *Daemon) rollback(ctx context.Context, s *scope, u *UpdateRecord) (Result, error) {
	s.report(v1alpha1.ReasonAnnotation, clip("rolling back: "+u.Failure))
	queued := s.host.Status.RollbackQueued || s.host.Spec.BootOrder == "rollback"
	// `bootc rollback` toggles, so a second one would undo the first.
	if !u.RollbackIssued && !queued {
		if err := d.flush(ctx, s); err != nil {
			return Result{}, err
		}
		if err := d.Bootc.Rollback(ctx); err != nil {
			return Result{}, err
		}
		u.RollbackIssued = true
		if err := SaveRecord(d.StateDir, s.rec); err != nil {
			return Result{}, err
		}
		if err := d.step(stepRolledBack); err != nil {
			return Result{}, err
		}
	}
	return d.reboot(ctx, s)
}

// rolledBack reports the update failed once the node booted again after
// its rollback. It never tries again.
func (d *Daemon) rolledBack(s *scope, u *UpdateRecord) (Result, error) {
	booted := s.host.Status.Booted
	u.Phase = PhaseFailed
	if booted.Digest() == bootc.DigestOf(u.Image) {
		u.Reason = fmt.Sprintf("%s; the rollback did not take effect: the node still runs %s", u.Failure, booted.PullSpec())
	} else {
		u.Reason = fmt.Sprintf("%s; rolled back to %s", u.Failure, booted.PullSpec())
	}
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return Result{}, err
	}
	s.log.Info("Rolled back", "booted", booted.PullSpec())
	d.event(s, corev1.EventTypeWarning, "UpdateFailed", "Rollback", "%s", u.Reason)
	d.reportFailed(s, u)
	return Result{}, nil
}

func (d *Daemon) event(s *scope, eventType, reason, action, note string, args ...any) {
	if d.Recorder == nil {
		return
	}
	d.Recorder.Eventf(s.node, nil, eventType, reason, action, note, args...)
}

// clip keeps a reason within maxReason bytes.
func clip(s string) string {
	if len(s) <= maxReason {
		return s
	}
	return strings.ToValidUTF8(s[:maxReason-3], "") + "..."
}
