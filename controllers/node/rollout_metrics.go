package node

import (
	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/metrics"
)

// setMetrics sets the pool's gauges from this reconcile: its nodes by
// reported state, the updated count, and the gates this controller
// evaluates (maintenance windows, image approval, and the spec's gates by
// their names). A gate holds when it is why the pool's pending nodes do
// not start: a closed window (or windows that cannot be read) with nodes
// still to update, an image that waits for approval or was rejected, a
// spec gate that failed or could not be evaluated (an invalid spec holds
// through every gate).
func setMetrics(s *scope, nodes poolNodeSet) {
	byState := map[string]int{}
	for _, n := range nodes.plan {
		st := n.State
		if st == "" {
			st = metrics.NodeStateUnknown
		}
		byState[st]++
	}
	metrics.SetPoolNodes(s.pool.Name, byState, int(s.result.UpdatedCount))
	metrics.SetPoolSkipped(s.pool.Name, len(s.result.Quarantined), len(s.result.Held))
	metrics.GateHeld(s.pool.Name, metrics.GateMaintenanceWindow, !s.window.open() && s.result.PendingCount > 0)
	approval := s.target.waitReason == v1alpha1.ReasonAwaitingImageApproval || s.target.waitReason == v1alpha1.ReasonImageRejected
	metrics.GateHeld(s.pool.Name, metrics.GateImageApproval, approval)

	keep := map[string]bool{metrics.GateMaintenanceWindow: true, metrics.GateImageApproval: true}
	holding := map[string]bool{}
	for _, v := range s.gates.holding {
		holding[v.Gate] = true
	}
	for _, g := range s.pool.Spec.Gates {
		keep[g.Name] = true
		metrics.GateHeld(s.pool.Name, g.Name, len(s.gates.invalid) > 0 || holding[g.Name])
	}
	metrics.ForgetGatesExcept(s.pool.Name, keep)
}
