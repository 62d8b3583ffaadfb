package node

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/internal/gate"
)

// Gates: CEL and blockingPods gates read the cluster as the gate identity
// (gate.ServiceAccount), which the controller impersonates and which is
// the only identity it may impersonate; what that identity may read is
// config/rbac/gate_reader_role.yaml's, and an admin's. A Prometheus gate's
// CA and token are read by the controller itself, from strata-system, and
// only from Secrets labelled for gates.
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=serviceaccounts,verbs=impersonate,resourceNames=strata-gates
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=secrets,verbs=list
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=configmaps,verbs=get

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
// a gate blocks. Invalid gates are not evaluated: they hold already. The
// evaluation is bounded as a whole (gate.Evaluator.Budget), so that slow
// gates delay this pool's reconcile by that much at most, and the other
// pools not at all (the controller has several workers).
func (r *Reconciler) checkGates(ctx context.Context, s *scope, nodes poolNodeSet) {
	if len(s.gates.invalid) > 0 {
		return
	}
	gates := s.pool.Spec.Gates
	var names []string
	if gate.HasNodeGates(gates) {
		names = make([]string, 0, len(nodes.plan))
		for i := range nodes.plan {
			names = append(names, nodes.plan[i].Name)
		}
		slices.Sort(names)
	}
	res := r.evaluator().Check(ctx, gates, names)
	for _, v := range res.Pool {
		if v.Pass {
			continue
		}
		s.gates.holding = append(s.gates.holding, v)
		// The status says the kind of failure; the detail, which holds
		// no object data, is for whoever runs the controller.
		if v.Detail != "" {
			log.FromContext(ctx).V(1).Info("Gate could not be evaluated", "gate", v.Gate, "kind", v.Kind, "error", v.Detail)
		}
	}
	s.gates.blocked = res.Blocked
	for i := range nodes.plan {
		_, nodes.plan[i].Blocked = res.Blocked[nodes.plan[i].Name]
	}
}
