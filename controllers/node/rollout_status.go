package node

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node/plan"
	"github.com/strata-dev/strata/internal/gate"
	"github.com/strata-dev/strata/internal/status"
)

// maxListed bounds how many nodes a condition message names; the counts
// say how many there are.
const maxListed = 10

// setStatus computes every part of the pool's status this controller owns
// (poolstatus.Rollout), every time: the machine counts and the Updated,
// Updating and NodeDegraded conditions. A node's write that failed is
// the Updated condition's (reason Retrying), not NodeDegraded's: no node
// failed its update, and the next try may well succeed.
func setStatus(pool *v1alpha1.MachineConfigPool, s *scope) {
	res := s.result
	st := &pool.Status
	st.MachineCount = res.MachineCount
	st.UpdatedMachineCount = res.UpdatedCount
	st.ReadyMachineCount = res.ReadyCount
	st.UnavailableMachineCount = res.UnavailableCount
	st.DegradedMachineCount = res.DegradedCount
	st.MaintenanceWindow = windowStatus(s.window)
	st.NewNodes = newNodes(st.NewNodes, s.target, pool.Spec.Paused, res.Halted, s.released)
	st.StagedAheadMachineCount = res.StagedAheadCount
	st.Canary = canaryStatus(s)
	st.Progressive = progressiveStatus(s)

	gen := pool.Generation
	updated := metav1.Condition{Type: v1alpha1.PoolUpdated, ObservedGeneration: gen}
	updating := metav1.Condition{Type: v1alpha1.PoolUpdating, ObservedGeneration: gen}
	what := describeTarget(s.target)

	switch {
	case res.Updated:
		updated.Status, updated.Reason = metav1.ConditionTrue, v1alpha1.ReasonAllNodesUpdated
		updated.Message = fmt.Sprintf("All %d nodes run %s", res.MachineCount, what)
		if res.MachineCount == 0 {
			updated.Reason, updated.Message = v1alpha1.ReasonNoNodes, "The pool selects no node"
		}
	case s.target.Waiting != "":
		updated.Status, updated.Reason, updated.Message = metav1.ConditionFalse, v1alpha1.ReasonWaitingForImage, s.target.Waiting
		if s.target.waitReason != "" {
			updated.Reason = s.target.waitReason
		}
	case pool.Spec.Paused:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonPaused
		updated.Message = fmt.Sprintf("The pool is paused: %d of %d nodes run %s", res.UpdatedCount, res.MachineCount, what)
	case s.window.err != nil:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidMaintenanceWindow
		updated.Message = fmt.Sprintf("No node is taken until the maintenance windows are fixed: %v; %d of %d nodes run %s",
			s.window.err, res.UpdatedCount, res.MachineCount, what)
	case res.Halted && res.Canary != nil && res.Canary.Phase != v1alpha1.CanaryDone:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonRolloutHalted
		updated.Message = fmt.Sprintf("The rollout of %s is halted: %d nodes failed during the canary or its soak, where one failure halts; %d of %d nodes updated",
			what, failedOnTarget(res), res.UpdatedCount, res.MachineCount)
	case res.Halted && res.Step != nil && res.Step.Phase == plan.StepFailed:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonRolloutHalted
		updated.Message = fmt.Sprintf("The rollout of %s is halted at step %d of %d: %d of the %d nodes sent run it, under the success threshold (%d needed); failed: %s",
			what, res.Step.Index+1, res.Step.Count, res.Step.Updated, res.Step.Sent, res.Step.Needed, degradedNames(res))
	case s.stepsInvalid != "":
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidSteps
		updated.Message = fmt.Sprintf("No node is taken until the steps are fixed: %s; %d of %d nodes run %s",
			s.stepsInvalid, res.UpdatedCount, res.MachineCount, what)
	case res.Step != nil && res.Step.Phase == plan.StepSoaking:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonRollingOut
		updated.Message = fmt.Sprintf("Step %d of %d is done: %d of %d nodes run %s; soaking until %s, then step %d",
			res.Step.Index+1, res.Step.Count, res.UpdatedCount, res.MachineCount, what, res.Step.SoakUntil.UTC().Format(time.RFC3339), res.Step.Index+2)
	case res.QuarantineFull && !res.Halted:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonDrainsBlocked
		updated.Message = fmt.Sprintf("No other node is taken while %d nodes are quarantined with a blocked drain (maxBlockedNodes %d); %d of %d nodes run %s",
			len(res.Quarantined), planPool(pool, s.window, s.target.Target, time.Time{}).MaxBlockedNodes, res.UpdatedCount, res.MachineCount, what)
	case res.Halted:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonRolloutHalted
		updated.Message = fmt.Sprintf("The rollout of %s is halted: %d nodes failed (maxFailedNodes %d); %d of %d nodes updated",
			what, failedOnTarget(res), planPool(pool, s.window, s.target.Target, time.Time{}).MaxFailedNodes, res.UpdatedCount, res.MachineCount)
	case !s.window.open():
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonOutsideMaintenanceWindow
		updated.Message = fmt.Sprintf("Outside the maintenance windows, %s: %d of %d nodes run %s",
			nextOpening(s.window), res.UpdatedCount, res.MachineCount, what)
	case len(s.gates.invalid) > 0:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidGate
		updated.Message = fmt.Sprintf("No node is taken until the gates are fixed: %v; %d of %d nodes run %s",
			s.gates.invalid.ToAggregate(), res.UpdatedCount, res.MachineCount, what)
	case s.gates.held():
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonHeldByGate
		updated.Message = fmt.Sprintf("Held by %s; %d of %d nodes run %s",
			verdicts(s.gates.holding), res.UpdatedCount, res.MachineCount, what)
	case len(res.Blocked) > 0 && !res.Updating:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonHeldByGate
		updated.Message = fmt.Sprintf("Every node to be taken is held by a gate: %s; %d of %d nodes run %s",
			blockedNodes(s.gates, res.Blocked), res.UpdatedCount, res.MachineCount, what)
	case res.Canary != nil && res.Canary.Phase == v1alpha1.CanaryUpdating:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonCanaryUpdating
		updated.Message = fmt.Sprintf("The canary is updating: %d of its %d nodes run %s; the other nodes wait for it and its soak (%s)",
			res.Canary.UpdatedCount, res.Canary.MachineCount, what, pool.Spec.Canary.SoakTime.Duration)
	case res.Canary != nil && res.Canary.Phase == v1alpha1.CanarySoaking:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonCanarySoaking
		updated.Message = fmt.Sprintf("The canary's %d nodes run %s; soaking until %s, then the other %d nodes follow",
			res.Canary.MachineCount, what, res.Canary.SoakUntil.UTC().Format(time.RFC3339), res.MachineCount-res.UpdatedCount)
	default:
		updated.Status, updated.Reason = metav1.ConditionFalse, v1alpha1.ReasonRollingOut
		updated.Message = fmt.Sprintf("%d of %d nodes run %s", res.UpdatedCount, res.MachineCount, what)
		if len(res.Blocked) > 0 {
			updated.Message += "; not taken, held by a gate: " + blockedNodes(s.gates, res.Blocked)
		}
	}
	if st := res.Step; st != nil && st.Phase == plan.StepUpdating && !res.Updated {
		updated.Message += fmt.Sprintf("; step %d of %d: %d of its %d nodes sent", st.Index+1, st.Count, st.Sent, st.Size)
	}
	if len(res.Quarantined) > 0 {
		updated.Message += "; quarantined, drain blocked (tried again and again): " + heldNodes(res.Quarantined)
	}
	if len(res.Held) > 0 && !res.Updated {
		updated.Message += "; not taken, held by an admin (" + v1alpha1.HoldAnnotation + "): " + heldNodes(res.Held)
	}
	if res.ActiveGroup != "" && !res.Updated {
		updated.Message += fmt.Sprintf("; one group at a time, now %s=%s (%s)", pool.Spec.Topology.Key, res.ActiveGroup, groupProgress(res.Groups))
	}
	if res.StagedAheadCount > 0 && !res.Updated {
		updated.Message += fmt.Sprintf("; %d nodes hold the image staged ahead", res.StagedAheadCount)
	}
	if len(res.WaitingForDaemon) > 0 && !res.Updated {
		updated.Message += fmt.Sprintf("; waiting for the daemon to record the original image of %s", listed(res.WaitingForDaemon))
	}
	if res.Updated && s.window.err != nil {
		// Nothing to hold now, but the next change would be held: say so
		// before it is.
		updated.Reason = v1alpha1.ReasonInvalidMaintenanceWindow
		updated.Message += fmt.Sprintf("; the next update will be held until the maintenance windows are fixed: %v", s.window.err)
	}
	if res.Updated && len(s.gates.invalid) > 0 {
		updated.Reason = v1alpha1.ReasonInvalidGate
		updated.Message += fmt.Sprintf("; the next update will be held until the gates are fixed: %v", s.gates.invalid.ToAggregate())
	}
	if len(s.target.ignored) > 0 {
		updated.Message += fmt.Sprintf("; not applied, since the pool has no MachineOSConfig to build an image: %s (only /var-bound files reach its nodes)",
			strings.Join(s.target.ignored, ", "))
		if res.Updated {
			updated.Reason = v1alpha1.ReasonImageOnlyContent
		}
	}

	switch {
	case res.Updating:
		updating.Status, updating.Reason = metav1.ConditionTrue, v1alpha1.ReasonRollingOut
		updating.Message = fmt.Sprintf("Updating to %s: %d of %d nodes updated, %d unavailable (maxUnavailable %d)",
			what, res.UpdatedCount, res.MachineCount, res.UnavailableCount, res.MaxUnavailable)
		if updated.Reason == v1alpha1.ReasonCanaryUpdating || updated.Reason == v1alpha1.ReasonCanarySoaking {
			updating.Reason = updated.Reason
			updating.Message += "; " + updated.Message
		}
		if !s.window.open() || s.gates.held() || updated.Reason == v1alpha1.ReasonInvalidGate {
			updating.Message += "; nodes already updating finish, no other node is taken: " + updated.Message
		} else if len(res.Blocked) > 0 {
			updating.Message += "; not taken, held by a gate: " + blockedNodes(s.gates, res.Blocked)
		}
	case pool.Spec.Paused:
		updating.Status, updating.Reason, updating.Message = metav1.ConditionFalse, v1alpha1.ReasonPaused, "The pool is paused"
	default:
		updating.Status, updating.Reason, updating.Message = metav1.ConditionFalse, updated.Reason, updated.Message
	}
	if s.retry != nil {
		// A node could not be written: what was planned holds, and the
		// pool says what failed first and when it is tried again.
		updated.Reason = v1alpha1.ReasonRetrying
		updated.Message = s.retry.Message() + "; " + updated.Message
	}

	degraded := metav1.Condition{Type: v1alpha1.PoolNodeDegraded, ObservedGeneration: gen,
		Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAsExpected, Message: "No node failed its update"}
	var problems []string
	for i, p := range res.Degraded {
		if i == maxListed {
			problems = append(problems, fmt.Sprintf("and %d more", len(res.Degraded)-maxListed))
			break
		}
		problems = append(problems, "node "+p.Node+": "+p.Reason)
	}
	if len(res.Conflicts) > 0 {
		problems = append(problems, "selected by several pools and left alone: "+listed(res.Conflicts))
	}
	if len(problems) > 0 {
		degraded.Status = metav1.ConditionTrue
		degraded.Reason = v1alpha1.ReasonNodesDegraded
		if len(res.Degraded) == 0 && len(res.Conflicts) > 0 {
			degraded.Reason = v1alpha1.ReasonNodeConflict
		}
		degraded.Message = strings.Join(problems, "; ")
		if res.Halted {
			degraded.Message = "Rollout halted. " + degraded.Message
		}
	}
	for _, c := range []*metav1.Condition{&updated, &updating, &degraded} {
		c.Message = status.Message(c.Message)
		meta.SetStatusCondition(&st.Conditions, *c)
	}
}

// setRetrying is the pool's status when its inputs could not be read and
// nothing was planned: the Updated condition says what failed and when it
// is tried again (reason Retrying) and keeps the status it had, which
// nothing read contradicts (Unknown when it has none yet); the rest of
// the share is what the last reconcile that planned wrote.
func setRetrying(pool *v1alpha1.MachineConfigPool, s *scope) {
	updated := metav1.Condition{Type: v1alpha1.PoolUpdated, Status: metav1.ConditionUnknown, ObservedGeneration: pool.Generation,
		Reason: v1alpha1.ReasonRetrying, Message: status.Message(s.retry.Message())}
	if old := meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.PoolUpdated); old != nil {
		updated.Status = old.Status
	}
	meta.SetStatusCondition(&pool.Status.Conditions, updated)
}

// canaryStatus is status.canary: absent without a canary, or without a
// target to measure nodes against.
func canaryStatus(s *scope) *v1alpha1.CanaryStatus {
	c := s.result.Canary
	if c == nil {
		return nil
	}
	out := &v1alpha1.CanaryStatus{Phase: c.Phase, TargetConfig: s.target.Config, TargetImage: s.target.Image,
		MachineCount: c.MachineCount, UpdatedMachineCount: c.UpdatedCount}
	if !c.SoakStartedAt.IsZero() {
		out.SoakStartedAt = &metav1.Time{Time: c.SoakStartedAt}
		out.SoakUntil = &metav1.Time{Time: c.SoakUntil}
	}
	return out
}

// windowStatus is status.maintenanceWindow: absent without windows or
// when they cannot be read (the Updated condition says why).
func windowStatus(w windowState) *v1alpha1.MaintenanceWindowStatus {
	if !w.set || w.err != nil {
		return nil
	}
	out := &v1alpha1.MaintenanceWindowStatus{Open: w.state.Open}
	if t := w.state.ClosesAt; !t.IsZero() {
		out.ClosesAt = &metav1.Time{Time: t}
	}
	if t := w.state.NextOpensAt; !t.IsZero() {
		out.NextOpensAt = &metav1.Time{Time: t}
	}
	return out
}

// verdicts lists the gates that hold the pool, each with its reason.
func verdicts(vs []gate.Verdict) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

// blockedNodes lists the nodes a gate passed over, each with why.
func blockedNodes(g gateState, nodes []string) string {
	parts := make([]string, 0, min(len(nodes), maxListed)+1)
	for i, n := range nodes {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(nodes)-maxListed))
			break
		}
		v, ok := g.blocked[n]
		if !ok {
			parts = append(parts, "node "+n)
			continue
		}
		parts = append(parts, "node "+n+" by "+v.String())
	}
	return strings.Join(parts, "; ")
}

// nextOpening tells when the next window opens, in the first window's
// zone (the one a person most likely thinks in).
func nextOpening(w windowState) string {
	if w.state.NextOpensAt.IsZero() {
		return "and none opens again"
	}
	return "the next window opens at " + w.state.NextOpensAt.In(w.loc).Format(time.RFC3339) + " (" + w.loc.String() + ")"
}

func describeTarget(t target) string {
	switch {
	case t.Config == "":
		return "no configuration"
	case t.Image == "":
		return t.Config + " on their original images"
	default:
		return t.Config + " (" + t.Image + ")"
	}
}

// failedOnTarget counts the nodes that failed on the current target.
func failedOnTarget(res plan.Result) int32 { return res.FailedCount }

func listed(names []string) string {
	if len(names) > maxListed {
		return strings.Join(names[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxListed)
	}
	return strings.Join(names, ", ")
}

// heldNodes lists nodes with their reasons, as "w2 (disk), w5 (rack)".
func heldNodes(held []plan.NodeProblem) string {
	parts := make([]string, 0, len(held))
	for _, h := range held {
		// An admin's hold or a drain's blockers: bounded, a list of them fits.
		parts = append(parts, fmt.Sprintf("%s (%s)", h.Node, status.Truncate(h.Reason, 300)))
	}
	return listed(parts)
}

// groupProgress says how far each topology group is, in the order a
// sequential rollout takes them: "c 2/2, a 1/2, b 0/2".
func groupProgress(groups []plan.GroupResult) string {
	parts := make([]string, 0, len(groups))
	for _, g := range groups {
		name := g.Name
		if name == "" {
			name = "(no label)"
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d", name, g.UpdatedCount, g.MachineCount))
	}
	return strings.Join(parts, ", ")
}

// degradedNames lists the pool's Degraded nodes by name.
func degradedNames(res plan.Result) string {
	names := make([]string, 0, len(res.Degraded))
	for _, d := range res.Degraded {
		names = append(names, d.Node)
	}
	return listed(names)
}
