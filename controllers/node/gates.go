package node

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/internal/gate"
)

// gateNamespace is where the gates' Secrets and ConfigMaps are read when
// the Reconciler is given no Evaluator.
const gateNamespace = "strata-system"

// gateState is the pool's gates as of this reconcile.
type gateState struct {
	// invalid: what Validate found; every node is held.
	invalid field.ErrorList
	// checked: the gates were evaluated (a node was about to be taken).
	checked bool
	// holding: the gates that hold every node (failed pool gates, and
	// node gates that could not be evaluated).
	holding []gate.Verdict
	// blocked: the nodes a blockingPods gate holds, each with its verdict.
	blocked map[string]gate.Verdict
}

// held says whether the gates hold every node of the pool.
func (g gateState) held() bool { return len(g.invalid) > 0 || len(g.holding) > 0 }

func (r *Reconciler) gateRecheck() time.Duration {
	if r.GateRecheck <= 0 {
		return DefaultGateRecheck
	}
	return r.GateRecheck
}

func (r *Reconciler) evaluator() *gate.Evaluator {
	if r.Gates != nil {
		return r.Gates
	}
	return &gate.Evaluator{Reader: r.Client, Namespace: gateNamespace}
}

// checkGates evaluates the pool's gates into s.gates and marks the nodes
// a gate blocks. Invalid gates are not evaluated: they hold already.
func (r *Reconciler) checkGates(ctx context.Context, s *scope, nodes poolNodeSet) {
	if len(s.gates.invalid) > 0 {
		return
	}
	gates := s.pool.Spec.Gates
	ev := r.evaluator()
	for _, v := range ev.Pool(ctx, gates) {
		if !v.Pass {
			s.gates.holding = append(s.gates.holding, v)
		}
	}
	if !gate.HasNodeGates(gates) {
		return
	}
	names := make([]string, 0, len(nodes.plan))
	for i := range nodes.plan {
		names = append(names, nodes.plan[i].Name)
	}
	slices.Sort(names)
	blocked, failed := ev.Nodes(ctx, gates, names)
	s.gates.holding = append(s.gates.holding, failed...)
	s.gates.blocked = blocked
	for i := range nodes.plan {
		_, nodes.plan[i].Blocked = blocked[nodes.plan[i].Name]
	}
}
