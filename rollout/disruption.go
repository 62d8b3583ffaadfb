package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/disruption"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/liveapply"
	"github.com/strata-dev/strata/rollout/unitaction"
)

// Images reads what an image is made of, for the decision: whether two
// images differ below Strata's configuration layer (a new base image or
// admin stage). *RegistryImages implements it.
type Images interface {
	// BelowConfigLayer names everything of image below its
	// configuration layer (the base and the admin stage), or returns ""
	// when image does not end in a configuration layer Strata appended.
	BelowConfigLayer(ctx context.Context, image string) (string, error)
}

// DisruptionRecord is the decision taken for one update: how much it
// disrupts the node, and why.
type DisruptionRecord struct {
	// Key names the update: UpdateKey(image, config).
	Key  string          `json:"key"`
	Kind disruption.Kind `json:"kind"`
	// Drain is set when the node is drained first.
	Drain bool `json:"drain,omitempty"`
	// Actions are the live actions, in the order they run.
	Actions []DisruptionAction `json:"actions,omitempty"`
	// Paths are the image paths a live apply writes.
	Paths  []string `json:"paths,omitempty"`
	Reason string   `json:"reason"`
	// From is the update key of the config and image the node ran when
	// this was decided ("" in records older than it: taken as the
	// current ones).
	From string `json:"from,omitempty"`
	// Ahead is set when it was decided for an update staged ahead.
	Ahead bool `json:"ahead,omitempty"`
	// Policy fingerprints the cluster's disruption policy it was decided
	// under (policyID): a decision taken ahead is taken again at the
	// node's turn when the policy changed since.
	Policy string `json:"policy,omitempty"`
}

// live says whether the decision applies the update live without a
// drain: nothing cordons, drains or reboots the node.
func (r *DisruptionRecord) live() bool { return r.Kind == disruption.Live && !r.Drain }

// DisruptionAction is a disruption.Action in the state file.
type DisruptionAction struct {
	Type    v1alpha1.NodeDisruptionPolicyActionType `json:"type"`
	Service string                                  `json:"service,omitempty"`
}

// summary is the decision as the disruption annotation and the Event say
// it.
func (r *DisruptionRecord) summary() string {
	return clip(string(r.Kind) + ": " + r.Reason)
}

// clusterPolicy is the disruption policy nodes follow, and its
// fingerprint (policyID): the `cluster` MachineConfiguration's merged
// status when it describes the current spec, else its spec merged over
// the defaults here (the same function its controller runs), else the
// defaults.
func (d *Daemon) clusterPolicy(ctx context.Context) (v1alpha1.NodeDisruptionPolicyClusterStatus, string, error) {
	var mc v1alpha1.MachineConfiguration
	err := d.reader().Get(ctx, types.NamespacedName{Name: v1alpha1.MachineConfigurationName}, &mc)
	var p v1alpha1.NodeDisruptionPolicyClusterStatus
	switch {
	case apierrors.IsNotFound(err):
		p = disruption.Defaults()
	case err != nil:
		return p, "", fmt.Errorf("get MachineConfiguration %s: %w", v1alpha1.MachineConfigurationName, err)
	case mc.Status.ObservedGeneration == mc.Generation:
		p = mc.Status.NodeDisruptionPolicyStatus.ClusterPolicies
	default:
		p = disruption.Merge(disruption.Defaults(), mc.Spec.NodeDisruptionPolicy)
	}
	id, err := policyID(p)
	return p, id, err
}

// policyID fingerprints a merged policy by its content, so that only a
// change of what the policy says (not a status write, nor an edit that
// merges to the same policy) counts as a change.
func policyID(p v1alpha1.NodeDisruptionPolicyClusterStatus) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("fingerprint the disruption policy: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// imageChanged says whether the desired image differs from the booted one
// below the configuration layer; when it cannot tell, it says so, and the
// update takes a full reboot.
func (d *Daemon) imageChanged(ctx context.Context, s *scope, image string) (bool, string) {
	booted := s.host.Status.Booted.PullSpec()
	if d.Images == nil {
		return true, "the daemon reads no images"
	}
	// Two registry round trips each, read at once: the decision is on
	// the path of every update (a live apply waits for nothing else).
	var a, b string
	var aErr, bErr error
	var wg sync.WaitGroup
	wg.Go(func() { a, aErr = d.Images.BelowConfigLayer(ctx, booted) })
	b, bErr = d.Images.BelowConfigLayer(ctx, image)
	wg.Wait()
	if aErr != nil {
		return true, fmt.Sprintf("could not read the booted image %s: %v", booted, aErr)
	}
	if bErr != nil {
		return true, fmt.Sprintf("could not read the desired image %s: %v", image, bErr)
	}
	switch {
	case a == "":
		return true, "the booted image " + booted + " does not end in a Strata configuration layer"
	case b == "":
		return true, "the desired image " + image + " does not end in a Strata configuration layer"
	}
	return a != b, ""
}

// policyRead is a read of the cluster's disruption policy in flight;
// done closes once policy and err are set.
type policyRead struct {
	done   chan struct{}
	policy v1alpha1.NodeDisruptionPolicyClusterStatus
	id     string
	err    error
}

// readPolicyBeside starts reading the cluster's policy, for the decision
// or readPolicy to join.
func (d *Daemon) readPolicyBeside(ctx context.Context, s *scope) {
	p := &policyRead{done: make(chan struct{})}
	s.policy = p
	go func() {
		defer close(p.done)
		p.policy, p.id, p.err = d.clusterPolicy(context.WithoutCancel(ctx))
	}()
}

// readBeside starts reading what the decision after a stage of image
// (for config) will need and that does not depend on the stage, beside
// it: the cluster's policy (an API round trip), the current and desired
// rendered configs (kept once read, see renderedConfig) and what is
// below the configuration layer of image and of the booted image (two
// registry round trips each). The decision then joins the reads rather
// than making them; on the path of every live apply, they took 0.1-0.2 s
// under a rollout's load. A failed read is read again by the decision.
func (d *Daemon) readBeside(ctx context.Context, s *scope, image, config string) {
	ctx = context.WithoutCancel(ctx)
	d.readPolicyBeside(ctx, s)
	for _, name := range []string{s.rec.CurrentConfig, config} {
		if name != "" {
			go func() { _, _ = d.renderedConfig(ctx, name) }()
		}
	}
	if d.Images == nil {
		return
	}
	for _, im := range []string{s.host.Status.Booted.PullSpec(), image} {
		go func() { _, _ = d.Images.BelowConfigLayer(ctx, im) }()
	}
}

// decisionPolicy is the policy read beside the stage, or one read now,
// with its fingerprint.
func (d *Daemon) decisionPolicy(ctx context.Context, s *scope) (v1alpha1.NodeDisruptionPolicyClusterStatus, string, error) {
	p := s.policy
	if p == nil {
		return d.clusterPolicy(ctx)
	}
	s.policy = nil
	select {
	case <-p.done:
	case <-ctx.Done():
		return v1alpha1.NodeDisruptionPolicyClusterStatus{}, "", ctx.Err()
	}
	if p.err != nil {
		return d.clusterPolicy(ctx)
	}
	return p.policy, p.id, nil
}

// readPolicy reads the cluster's policy at the turn of an update decided
// ahead (joining the read readConfig started), so that decide sees
// whether it changed since; a decision taken again uses the same read.
func (d *Daemon) readPolicy(ctx context.Context, s *scope) error {
	p, id, err := d.decisionPolicy(ctx, s)
	if err != nil {
		return err
	}
	s.policyID = id
	done := make(chan struct{})
	close(done)
	s.policy = &policyRead{done: done, policy: p, id: id}
	return nil
}

// decideDisruption decides what the update to (image, config) costs the
// node, once its image is staged (bootc reports the staged deployment's
// soft-reboot capability), and records it in the state file, the
// disruption annotation and an Event. Decided ahead (the update is
// staged ahead, not the node's yet), the disruption annotation, which
// is the node's current update's, waits for the node's turn, and
// reportCurrent reports a Live decision without a drain as stagedLive.
func (d *Daemon) decideDisruption(ctx context.Context, s *scope, image, config, key string, ahead bool) error {
	// The inputs are independent reads (the API server, bootc, the
	// registry): read at once, the decision costs the slowest of them,
	// not their sum.
	var (
		wg                sync.WaitGroup
		policy            v1alpha1.NodeDisruptionPolicyClusterStatus
		policyFP          string
		host              *bootc.Host
		policyErr, hstErr error
		changed           bool
		why               string
		changes           *disruption.Changes
		unknown           = "the node's current config is not recorded"
	)
	wg.Go(func() { policy, policyFP, policyErr = d.decisionPolicy(ctx, s) })
	// Not s.host: the status this sync started from predates the stage.
	wg.Go(func() { host, hstErr = d.status(ctx, s) })
	if current := s.rec.CurrentConfig; current != "" {
		wg.Go(func() { changes, unknown = d.compareConfigs(ctx, current, config) })
	}
	changed, why = d.imageChanged(ctx, s, image)
	wg.Wait()
	if err := errors.Join(policyErr, hstErr); err != nil {
		return err
	}
	in := disruption.Input{Policy: policy, ImageChanged: changed, Changes: changes}
	if staged := host.Status.Staged; staged != nil && staged.Digest() == bootc.DigestOf(image) {
		in.SoftRebootCapable = staged.SoftRebootCapable
	}
	dec := disruption.Decide(in)
	if dec.Kind == disruption.SoftReboot && d.Soft == nil {
		dec.Kind, dec.Reason = disruption.Reboot, dec.Reason+"; this daemon cannot soft-reboot: a full reboot instead"
	}
	switch {
	case in.Changes == nil:
		dec.Reason += " (" + unknown + ")"
	case why != "":
		dec.Reason += " (" + why + ")"
	}
	// (A decision ahead recorded without a fingerprint, by an older
	// daemon, is taken again too, but nothing says the policy changed.)
	if prev := s.rec.Disruption; !ahead && prev != nil && prev.Ahead && prev.Key == key && prev.Policy != "" && prev.Policy != policyFP {
		dec.Reason += "; decided again at the node's turn: the disruption policy changed since it was decided ahead (" + string(prev.Kind) + ")"
	}
	rec := &DisruptionRecord{Key: key, Kind: dec.Kind, Drain: dec.Drain, Reason: dec.Reason,
		From: UpdateKey(s.rec.CurrentImage, s.rec.CurrentConfig), Ahead: ahead, Policy: policyFP}
	for _, a := range dec.Actions {
		rec.Actions = append(rec.Actions, DisruptionAction{Type: a.Type, Service: a.Service})
	}
	if dec.Kind == disruption.Live {
		rec.Paths = in.Changes.Paths
	}
	s.rec.Disruption = rec
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return err
	}
	if ahead {
		s.log.Info("Decided the disruption of the update staged ahead", "kind", rec.Kind, "drain", rec.Drain,
			"reason", rec.Reason, "stageKey", key)
		d.event(s, corev1.EventTypeNormal, "Disruption", "DecideAhead", "Update to %s staged ahead: %s", image, rec.summary())
		return nil
	}
	s.log.Info("Decided the update's disruption", "kind", rec.Kind, "reason", rec.Reason)
	d.event(s, corev1.EventTypeNormal, "Disruption", "Decide", "%s", rec.summary())
	s.report(v1alpha1.DisruptionAnnotation, rec.summary())
	return nil
}

// compareConfigs compares two rendered configs by name; when either
// cannot be read or compared it returns nil changes (a full reboot) and
// why.
func (d *Daemon) compareConfigs(ctx context.Context, current, desired string) (*disruption.Changes, string) {
	var specs [2]*v1alpha1.MachineConfigSpec
	var errs [2]error
	var wg sync.WaitGroup
	for i, name := range []string{current, desired} {
		if name == "" {
			continue
		}
		wg.Go(func() {
			spec, err := d.renderedConfig(ctx, name)
			if err != nil {
				errs[i] = fmt.Errorf("could not read rendered config %s: %w", name, err)
				return
			}
			specs[i] = spec
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err.Error()
		}
	}
	c, err := disruption.Compare(specs[0], specs[1])
	if err != nil {
		return nil, strings.TrimSpace("could not compare the configs: " + err.Error())
	}
	return c, ""
}

// applyLive applies a Live decision: the node items, the changed /etc
// paths exactly as the staged deployment has them (package liveapply),
// then the actions in order. The staged image stays staged, so that any
// later boot boots it with the same /etc. The update is then recorded as
// current: its config runs, its image is staged. A refusal, a mismatch
// or a failed action falls back to a full reboot, saying why.
func (d *Daemon) applyLive(ctx context.Context, s *scope, image, config string) error {
	rec := s.rec.Disruption
	fallback := func(why string) error {
		rec.Kind, rec.Drain, rec.Actions, rec.Paths = disruption.Reboot, true, nil, nil
		rec.Reason = clip(rec.Reason + "; " + why + ": a full reboot instead")
		if err := SaveRecord(d.StateDir, s.rec); err != nil {
			return err
		}
		s.log.Info("The live apply failed: falling back to a full reboot", "reason", rec.Reason)
		d.event(s, corev1.EventTypeWarning, "Disruption", "LiveApply", "%s", rec.summary())
		s.report(v1alpha1.DisruptionAnnotation, rec.summary())
		return nil
	}
	host, err := d.status(ctx, s)
	if err != nil {
		return err
	}
	staged := host.Status.Staged
	if staged == nil || staged.Digest() != bootc.DigestOf(image) || staged.Ostree == nil {
		return fallback("bootc status shows no ostree deployment of the image staged")
	}
	if len(rec.Actions) > 0 && d.Units == nil {
		return fallback("the daemon has no systemctl to run " + actionNames(rec.Actions))
	}
	skipped, err := d.writeItems(s)
	if err != nil {
		return err
	}
	// Recorded first: a path written live, even by an apply that then
	// fails or is cut short, must be written again before a reboot into
	// another image.
	s.rec.LivePaths = union(s.rec.LivePaths, rec.Paths)
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return err
	}
	deployment := liveapply.DeploymentDir(staged.Ostree.Stateroot, staged.Ostree.Checksum, staged.Ostree.DeploySerial)
	changes, err := liveapply.ApplyAndVerify(d.Root, deployment, rec.Paths)
	var refused *liveapply.RefusedError
	var mismatch *liveapply.MismatchError
	switch {
	case errors.As(err, &refused), errors.As(err, &mismatch):
		return fallback("the live apply was refused: " + err.Error())
	case err != nil:
		return fmt.Errorf("live apply: %w", err)
	}
	for _, c := range changes {
		s.log.Info("Wrote live", "path", c.Path, "change", c.Action)
	}
	if len(rec.Actions) > 0 {
		actions := make([]unitaction.Action, 0, len(rec.Actions))
		for _, a := range rec.Actions {
			actions = append(actions, unitaction.Action{Kind: unitaction.Kind(a.Type), Unit: a.Service})
		}
		if err := d.Units.Run(ctx, actions); err != nil {
			return fallback("an action failed: " + err.Error())
		}
	}
	// Any later boot must boot the image whose /etc now runs.
	if err := d.unlock(ctx, s); err != nil {
		return err
	}
	s.rec.CurrentConfig, s.rec.CurrentImage, s.rec.Skipped, s.rec.Update = config, image, skipped, nil
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return err
	}
	s.log.Info("Applied the update live", "paths", len(rec.Paths), "actions", actionNames(rec.Actions))
	d.event(s, corev1.EventTypeNormal, "Updated", "LiveApply", "Applied config %s live (%d paths, actions: %s); image %s is staged for the next boot",
		config, len(rec.Paths), actionNames(rec.Actions), image)
	return nil
}

func actionNames(as []DisruptionAction) string {
	if len(as) == 0 {
		return "none"
	}
	names := make([]string, 0, len(as))
	for _, a := range as {
		names = append(names, disruption.Action{Type: a.Type, Service: a.Service}.String())
	}
	return strings.Join(names, ", ")
}

// resyncLive writes the paths written live since the boot (LivePaths) as
// the image u reboots into has them, just before the reboot. ostree
// merges /etc from the booted deployment, for which a live-written file
// is a local modification: left as it is, the merge would copy it over
// the new image's version, which then never takes effect (bootc issue
// 438), where the live apply's image is not the one that boots (an
// update on top of a live apply that reboots). Written as the new image
// has it, the copy equals the new image's file and is no modification
// of the new deployment.
func (d *Daemon) resyncLive(ctx context.Context, s *scope, u *UpdateRecord) error {
	paths := s.rec.LivePaths
	if len(paths) == 0 || u == nil || u.Phase != PhaseRebooting {
		return nil
	}
	host, err := d.status(ctx, s)
	if err != nil {
		return err
	}
	staged := host.Status.Staged
	if staged == nil || staged.Digest() != bootc.DigestOf(u.Image) || staged.Ostree == nil {
		return fmt.Errorf("paths written live (%s) must be written as image %s has them before the reboot, but bootc status shows no ostree deployment of it staged",
			strings.Join(paths, ", "), u.Image)
	}
	deployment := liveapply.DeploymentDir(staged.Ostree.Stateroot, staged.Ostree.Checksum, staged.Ostree.DeploySerial)
	changes, err := liveapply.ApplyAndVerify(d.Root, deployment, paths)
	if err != nil {
		return fmt.Errorf("write the paths written live as image %s has them before the reboot: %w", u.Image, err)
	}
	for _, c := range changes {
		s.log.Info("Wrote live as the image to boot has it", "path", c.Path, "change", c.Action)
	}
	return nil
}

// union is a followed by the elements of b it lacks.
func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, p := range b {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
