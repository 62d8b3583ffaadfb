package rollout

import (
	"context"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/disruption"
	"github.com/strata-dev/strata/rollout/bootc"
)

// The node's MachineConfigNode (api/v1alpha1) mirrors the daemon's state
// for people and scripts used to OpenShift's: the Node's annotations stay
// the protocol with the controller, and nothing reads the mirror to act.
// The daemon writes it after every step of a sync that changes what it
// says (mirror), from the same state decide reads; a failed write is
// logged and made again at the next step, so the mirror can lag but
// never holds an update back.
//
// Its rights: get, create and update of MachineConfigNodes and their
// status (RBAC cannot narrow them to the daemon's own; the admission
// policy config/policy/machineconfignode_policy.yaml does, on the node
// name in its token). No list or watch: the daemon reads its own by
// name, uncached, only when it has no copy of it.
//
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfignodes,verbs=get;create;update
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfignodes/status,verbs=get;update

// digested matches the image references the MachineConfigNode's schema
// accepts; anything else is left out rather than have the API server
// refuse the whole status.
var digested = regexp.MustCompile(v1alpha1.DigestedPullSpecPattern)

// nodeView is what the MachineConfigNode says, gathered from one sync's
// scope: the Node's annotations (with what the sync is about to write),
// bootc's booted and staged digests, and the state file.
type nodeView struct {
	Node string
	Pool string
	// DesiredImage and DesiredConfig are the Node's desired pair.
	DesiredImage, DesiredConfig string
	// Image and Config are the pair the daemon works toward: the desired
	// one, or an update whose reboot happened, which runs to its verdict.
	Image, Config string
	// CurrentImage and CurrentConfig are those the daemon reports.
	CurrentImage, CurrentConfig string
	State, Reason               string
	// Booted and Staged are bootc's digests.
	Booted, Staged string
	// Cordoned is the Node's spec.unschedulable; DrainRequested and
	// DrainApplied are the drain handshake for the pair's key.
	Cordoned, DrainRequested, DrainApplied bool
	// Phase is the state file's phase of the pair's update ("" before
	// its drain); RebootAsked is set once its reboot was recorded.
	Phase       Phase
	RebootAsked bool
	// Decision is the disruption decided for the pair, once staged.
	Decision *DisruptionRecord
	// Completed says the state file records the pair as the node's.
	Completed bool
}

// view gathers the nodeView of s.
func (d *Daemon) view(s *scope) *nodeView {
	ann := func(k string) string {
		if v, ok := s.set[k]; ok {
			return v
		}
		return s.node.Annotations[k]
	}
	v := &nodeView{
		Node:          d.NodeName,
		Pool:          ann(v1alpha1.NodePoolAnnotation),
		DesiredImage:  ann(v1alpha1.DesiredImageAnnotation),
		DesiredConfig: ann(v1alpha1.DesiredConfigAnnotation),
		CurrentImage:  ann(v1alpha1.CurrentImageAnnotation),
		CurrentConfig: ann(v1alpha1.CurrentConfigAnnotation),
		State:         ann(v1alpha1.StateAnnotation),
		Reason:        ann(v1alpha1.ReasonAnnotation),
		Booted:        s.host.Status.Booted.Digest(),
		Staged:        s.staged,
		Cordoned:      s.node.Spec.Unschedulable,
	}
	v.Image, v.Config = v.DesiredImage, v.DesiredConfig
	key := UpdateKey(v.Image, v.Config)
	if u := s.rec.Update; u != nil && (u.Key == key || u.pastReboot(d.observe(s))) {
		v.Image, v.Config, key = u.Image, u.Config, u.Key
		v.Phase, v.RebootAsked = u.Phase, u.BootID != ""
	}
	if dr := s.rec.Disruption; dr != nil && dr.Key == key {
		v.Decision = dr
	}
	drain := v1alpha1.DrainRequestPrefix + key
	v.DrainRequested = ann(v1alpha1.DesiredDrainAnnotation) == drain
	v.DrainApplied = v.DrainRequested && ann(v1alpha1.LastAppliedDrainAnnotation) == drain
	v.Completed = v.Image != "" && s.rec.CurrentImage == v.Image && s.rec.CurrentConfig == v.Config
	return v
}

// Progress of an image update, in order; the conditions follow from it.
const (
	stepNone      = iota // not taken on (or rejected)
	stepPreparing        // Working, staging the image
	stepStaged           // staged, deciding the disruption
	stepDecided          // decided; draining, or applying live
	stepDrained          // drained; writing the files
	stepExecuted         // the reboot recorded: files written, image set to boot
	stepRebooted         // booted again (or rolling back): verifying
	stepComplete         // verified and recorded as the node's
)

// step is how far v's image update got.
func (v *nodeView) step() int {
	failed := v.Phase == PhaseFailed
	switch {
	case v.Completed && !failed:
		return stepComplete
	case v.Phase == PhaseVerifying, v.Phase == PhaseRollingBack, failed && v.RebootAsked:
		return stepRebooted
	case v.Phase == PhaseRebooting:
		return stepExecuted
	case failed:
		return stepNone
	case v.Decision != nil && v.DrainApplied:
		return stepDrained
	case v.Decision != nil:
		return stepDecided
	case v.Staged == bootc.DigestOf(v.Image):
		return stepStaged
	case v.State == v1alpha1.NodeStateWorking:
		return stepPreparing
	}
	return stepNone
}

// nodeConditions computes every condition of the MachineConfigNode from
// v, each time; lastTransitionTime is left to mergeConditions.
func nodeConditions(v *nodeView) []metav1.Condition {
	conds := make([]metav1.Condition, 0, 11)
	set := func(t string, status metav1.ConditionStatus, reason, msg string, args ...any) {
		conds = append(conds, metav1.Condition{Type: t, Status: status, Reason: reason, Message: fmt.Sprintf(msg, args...)})
	}
	target := fmt.Sprintf("config %s, image %s", v.Config, v.Image)
	failed := v.Phase == PhaseFailed

	// Updated and NodeDegraded say where the node is; the others how far
	// its latest update got.
	switch {
	case v.DesiredImage == "":
		set(v1alpha1.MCNUpdated, metav1.ConditionFalse, v1alpha1.ReasonMCNNoUpdate, "The node has no desired image yet")
	case v.State == v1alpha1.NodeStateDone && v.Completed && v.Image == v.DesiredImage && v.Config == v.DesiredConfig:
		set(v1alpha1.MCNUpdated, metav1.ConditionTrue, v1alpha1.ReasonMCNDone, "The node runs %s", target)
	case failed:
		set(v1alpha1.MCNUpdated, metav1.ConditionFalse, v1alpha1.ReasonMCNFailed, "The update to %s failed", target)
	default:
		set(v1alpha1.MCNUpdated, metav1.ConditionFalse, v1alpha1.ReasonMCNInProgress, "The node is to run config %s, image %s", v.DesiredConfig, v.DesiredImage)
	}
	if v.State == v1alpha1.NodeStateDegraded {
		set(v1alpha1.MCNNodeDegraded, metav1.ConditionTrue, v1alpha1.ReasonMCNFailed, "%s", v.Reason)
	} else {
		set(v1alpha1.MCNNodeDegraded, metav1.ConditionFalse, v1alpha1.ReasonAsExpected, "The node is not degraded")
	}

	phases := []string{
		v1alpha1.MCNUpdatePrepared, v1alpha1.MCNImagePulledFromRegistry, v1alpha1.MCNCordoned, v1alpha1.MCNDrained,
		v1alpha1.MCNAppliedFiles, v1alpha1.MCNAppliedOSImage, v1alpha1.MCNUpdateExecuted, v1alpha1.MCNRebootedNode,
		v1alpha1.MCNUpdateComplete,
	}
	if v.DesiredImage == "" {
		for _, t := range phases {
			set(t, metav1.ConditionFalse, v1alpha1.ReasonMCNNoUpdate, "The node has no desired image yet")
		}
		return conds
	}

	// A config change on the image the node runs: files only.
	if v.Decision == nil && v.Phase == "" && v.Booted == bootc.DigestOf(v.Image) {
		status, reason := metav1.ConditionUnknown, v1alpha1.ReasonMCNInProgress
		if v.Completed {
			status, reason = metav1.ConditionTrue, v1alpha1.ReasonMCNDone
		}
		for _, t := range phases {
			switch t {
			case v1alpha1.MCNUpdatePrepared, v1alpha1.MCNAppliedFiles, v1alpha1.MCNUpdateExecuted, v1alpha1.MCNUpdateComplete:
				set(t, status, reason, "A config change on the image the node runs: %s", target)
			default:
				set(t, metav1.ConditionFalse, v1alpha1.ReasonMCNNotRequired, "A config change on the image the node runs needs no image, drain or reboot")
			}
		}
		return conds
	}

	step := v.step()
	// phase sets t True from done on, Unknown from started on, else
	// False.
	phase := func(t string, started, done int, what string) {
		switch {
		case step >= done:
			set(t, metav1.ConditionTrue, v1alpha1.ReasonMCNDone, "%s: %s", what, target)
		case step >= started && !failed:
			set(t, metav1.ConditionUnknown, v1alpha1.ReasonMCNInProgress, "%s: %s", what, target)
		case failed:
			set(t, metav1.ConditionFalse, v1alpha1.ReasonMCNFailed, "The update to %s failed before this phase", target)
		default:
			set(t, metav1.ConditionFalse, v1alpha1.ReasonMCNNotYetOccurred, "The update to %s has not reached this phase", target)
		}
	}
	notRequired := func(t, why string) {
		set(t, metav1.ConditionFalse, v1alpha1.ReasonMCNNotRequired, "%s", why)
	}
	live := v.Decision != nil && v.Decision.Kind == disruption.Live
	drain := v.Decision == nil || v.Decision.Drain || !live

	prepared := "Staged the image and decided the disruption"
	if v.Decision != nil {
		prepared += " (" + v.Decision.summary() + ")"
	}
	phase(v1alpha1.MCNUpdatePrepared, stepPreparing, stepDecided, prepared)
	phase(v1alpha1.MCNImagePulledFromRegistry, stepPreparing, stepStaged, "Pulled and staged the image")
	if drain {
		if step == stepDecided && v.Cordoned {
			set(v1alpha1.MCNCordoned, metav1.ConditionTrue, v1alpha1.ReasonMCNDone, "Cordoned for the update to %s", target)
		} else {
			phase(v1alpha1.MCNCordoned, stepDecided, stepDrained, "Cordoned for the update")
		}
		phase(v1alpha1.MCNDrained, stepDecided, stepDrained, "Drained for the update")
	} else {
		notRequired(v1alpha1.MCNCordoned, "The disruption policy applies this update live without a drain")
		notRequired(v1alpha1.MCNDrained, "The disruption policy applies this update live without a drain")
	}
	// A live update writes its files and applies the image's /etc in
	// one step, from decided (or drained) to complete.
	phase(v1alpha1.MCNAppliedFiles, stepDrained, stepExecuted, "Wrote the files")
	phase(v1alpha1.MCNAppliedOSImage, stepDrained, stepExecuted, "Set the image to boot next")
	phase(v1alpha1.MCNUpdateExecuted, stepDecided, stepExecuted, "Executed the update")
	switch {
	case live:
		notRequired(v1alpha1.MCNRebootedNode, "The disruption policy applies this update live without a reboot")
	case v.Phase == PhaseRollingBack:
		set(v1alpha1.MCNRebootedNode, metav1.ConditionTrue, v1alpha1.ReasonMCNDone, "Rebooted into image %s; rolling back", v.Image)
	default:
		phase(v1alpha1.MCNRebootedNode, stepExecuted, stepRebooted, "Rebooted into the image")
	}
	switch v.Phase {
	case PhaseRollingBack:
		set(v1alpha1.MCNUpdateComplete, metav1.ConditionFalse, v1alpha1.ReasonMCNFailed, "Rolling back the update to %s", target)
	default:
		phase(v1alpha1.MCNUpdateComplete, stepRebooted, stepComplete, "Verified the node healthy")
	}
	return conds
}

// mergeConditions gives each condition of next the lastTransitionTime
// of the same condition in prev when its status did not change, else
// now.
func mergeConditions(prev, next []metav1.Condition, now metav1.Time, generation int64) []metav1.Condition {
	for i := range next {
		c := &next[i]
		c.ObservedGeneration = generation
		c.LastTransitionTime = now
		if p := meta.FindStatusCondition(prev, c.Type); p != nil && p.Status == c.Status {
			c.LastTransitionTime = p.LastTransitionTime
		}
	}
	return next
}

// mcnObject is the MachineConfigNode's spec and status, but for the
// conditions' times and the generation, from v.
func mcnObject(v *nodeView) (v1alpha1.MachineConfigNodeSpec, v1alpha1.MachineConfigNodeStatus) {
	image := func(s string) string {
		if digested.MatchString(s) {
			return s
		}
		return ""
	}
	spec := v1alpha1.MachineConfigNodeSpec{
		Node:          v1alpha1.LocalObjectReference{Name: v.Node},
		Pool:          v1alpha1.MachineConfigNodePool{Name: v.Pool},
		ConfigVersion: v1alpha1.MachineConfigNodeSpecConfigVersion{Desired: v.DesiredConfig},
		ConfigImage:   v1alpha1.MachineConfigNodeSpecConfigImage{DesiredImage: image(v.DesiredImage)},
	}
	status := v1alpha1.MachineConfigNodeStatus{
		ConfigVersion: v1alpha1.MachineConfigNodeStatusConfigVersion{Current: v.CurrentConfig, Desired: v.Config},
		ConfigImage:   v1alpha1.MachineConfigNodeStatusConfigImage{CurrentImage: image(v.CurrentImage), DesiredImage: image(v.Image)},
		Reason:        clip(v.Reason),
	}
	switch v.State {
	case v1alpha1.NodeStateDone, v1alpha1.NodeStateWorking, v1alpha1.NodeStateRebooting, v1alpha1.NodeStateDegraded:
		status.State = v.State
	}
	return spec, status
}

// mirror writes the node's MachineConfigNode if what it says changed
// since the daemon last wrote it. It never fails the sync: an update
// must not wait for its mirror. The write runs beside the sync's next
// actions: what the step says and when are taken now, and the writes
// stay one at a time and in order (each waits for the one before, not
// the step for it), so the MachineConfigNode goes through every step as
// before, while the update itself waits for none of its API writes
// (under a rollout's load a step waited 0.6 s for the step before's).
// A reboot waits for the last one; the end of a sync does not (the next
// sync's writes queue behind), so they outlive the sync's context.
func (d *Daemon) mirror(ctx context.Context, s *scope) {
	ctx = context.WithoutCancel(ctx)
	if d.rebootRequested || d.crashed || s.host == nil || s.rec == nil || s.node.UID == "" {
		return
	}
	v := d.view(s)
	if v.Decision != nil {
		// The next action may change the record.
		dr := *v.Decision
		v.Decision = &dr
	}
	at := metav1.NewTime(d.now())
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: s.node.Name, UID: s.node.UID}}
	done, before := make(chan struct{}), d.mirroring
	d.mirroring = done
	log := s.log
	go func() {
		defer close(done)
		if before != nil {
			<-before
		}
		if err := d.writeMCN(ctx, v, at, owner); err != nil {
			log.Error(err, "Could not write the MachineConfigNode: writing it again at the next step")
			d.mcn = nil
		}
	}()
}

// mirrored waits for the mirror's writes in flight, if any.
func (d *Daemon) mirrored() {
	if d.mirroring != nil {
		<-d.mirroring
		d.mirroring = nil
	}
}

func (d *Daemon) writeMCN(ctx context.Context, v *nodeView, at metav1.Time, owner []metav1.OwnerReference) error {
	spec, status := mcnObject(v)
	cur := d.mcn
	if cur == nil {
		cur = &v1alpha1.MachineConfigNode{}
		err := d.reader().Get(ctx, types.NamespacedName{Name: d.NodeName}, cur)
		switch {
		case apierrors.IsNotFound(err):
			cur = &v1alpha1.MachineConfigNode{ObjectMeta: metav1.ObjectMeta{Name: d.NodeName, OwnerReferences: owner}, Spec: spec}
			if err := d.Client.Create(ctx, cur); err != nil {
				return fmt.Errorf("create MachineConfigNode %s: %w", d.NodeName, err)
			}
		case err != nil:
			return fmt.Errorf("get MachineConfigNode %s: %w", d.NodeName, err)
		}
	}
	// The owner is the Node of this name now: one deleted and made again
	// has another uid, and its old MachineConfigNode would go with it.
	if !equality.Semantic.DeepEqual(cur.Spec, spec) || !equality.Semantic.DeepEqual(cur.OwnerReferences, owner) {
		cur.Spec, cur.OwnerReferences = spec, owner
		if err := d.Client.Update(ctx, cur); err != nil {
			return fmt.Errorf("update MachineConfigNode %s: %w", d.NodeName, err)
		}
	}
	status.ObservedGeneration = cur.Generation
	status.Conditions = mergeConditions(cur.Status.Conditions, nodeConditions(v), at, cur.Generation)
	if !equality.Semantic.DeepEqual(cur.Status, status) {
		cur.Status = status
		if err := d.Client.Status().Update(ctx, cur); err != nil {
			return fmt.Errorf("update MachineConfigNode %s status: %w", d.NodeName, err)
		}
	}
	d.mcn = cur
	return nil
}
