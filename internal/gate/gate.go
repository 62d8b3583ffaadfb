package gate

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// DefaultTimeout bounds one gate's evaluation: a Prometheus that does not
// answer in time holds the rollout until the next check.
const DefaultTimeout = 10 * time.Second

// DefaultBudget bounds all of one pool's gates together, per reconcile:
// however many gates a pool has and however slow they are, a reconcile
// waits no longer than this for them, and a gate not done by then holds
// the pool as timed out.
const DefaultBudget = 10 * time.Second

// Kinds of gate, as Verdict.Kind and in messages.
const (
	KindPrometheus   = "prometheus"
	KindCEL          = "cel"
	KindBlockingPods = "blockingPods"
)

// Verdict is one gate's answer.
type Verdict struct {
	// Gate is the gate's name, Kind its kind.
	Gate, Kind string
	// Pass: the rollout may go on as far as this gate is concerned.
	Pass bool
	// Message says why the gate holds (it failed, or it could not be
	// evaluated); empty when it passes. It goes to the pool's status and
	// Events, so it holds only what the gate's author wrote and the kind
	// of failure: never a value read from an object, never an error's
	// text that may quote one.
	Message string
	// Detail is the underlying error, for the controller's log only, set
	// only where it cannot hold object data (an API or HTTP error; never
	// a CEL evaluation's).
	Detail string
}

// String is the verdict as a condition message names it.
func (v Verdict) String() string {
	if v.Pass {
		return fmt.Sprintf("gate %q (%s) passes", v.Gate, v.Kind)
	}
	return fmt.Sprintf("gate %q (%s): %s", v.Gate, v.Kind, v.Message)
}

// Evaluator evaluates gates against the cluster and Prometheus servers.
type Evaluator struct {
	// Reader reads the CEL gates' objects and the pods and namespaces of
	// blockingPods gates, uncached: these are few reads of kinds the
	// controller does not watch. strata-controller passes NewReader's,
	// which impersonates the gate identity: it reads only what
	// config/rbac/gate_reader_role.yaml grants it and what an admin adds,
	// and never a Secret.
	Reader client.Reader
	// Credentials reads the Prometheus gates' CA bundles and tokens in
	// Namespace with the controller's own identity, and only Secrets
	// labelled v1alpha1.GateCredentialsLabel=true. Nil is Reader.
	Credentials client.Reader
	// Namespace holds the Secrets and ConfigMaps the gates name
	// (strata-system).
	Namespace string
	// Timeout bounds each gate; zero is DefaultTimeout.
	Timeout time.Duration
	// Budget bounds all of a pool's gates together in Check; zero is
	// DefaultBudget.
	Budget time.Duration
	// Transport, when set, is the base of Prometheus requests (tests);
	// nil is a clone of http.DefaultTransport.
	Transport *http.Transport
}

func (e *Evaluator) timeout() time.Duration {
	if e.Timeout <= 0 {
		return DefaultTimeout
	}
	return e.Timeout
}

func (e *Evaluator) budget() time.Duration {
	if e.Budget <= 0 {
		return DefaultBudget
	}
	return e.Budget
}

func (e *Evaluator) credentials() client.Reader {
	if e.Credentials != nil {
		return e.Credentials
	}
	return e.Reader
}

// Result is what Check found: the verdicts of the gates that hold the
// whole pool, and the nodes blockingPods gates hold.
type Result struct {
	// Pool: every prometheus and cel gate's verdict, then every
	// blockingPods gate that could not be evaluated (it holds every
	// node).
	Pool []Verdict
	// Blocked: for each node a blockingPods gate holds, the verdict.
	Blocked map[string]Verdict
}

// Check evaluates all of a pool's gates within the evaluator's budget:
// a gate still running when it runs out holds the pool as timed out.
// nodes are the nodes blockingPods gates are asked about; none asks them
// nothing.
func (e *Evaluator) Check(ctx context.Context, gates []v1alpha1.RolloutGate, nodes []string) Result {
	ctx, cancel := context.WithTimeout(ctx, e.budget())
	defer cancel()
	res := Result{Pool: e.Pool(ctx, gates)}
	if HasNodeGates(gates) && len(nodes) > 0 {
		blocked, failed := e.Nodes(ctx, gates, nodes)
		res.Pool = append(res.Pool, failed...)
		res.Blocked = blocked
	}
	return res
}

// Pool evaluates the gates that hold the whole pool (prometheus, cel), in
// order, and returns every verdict. Gates are taken to be valid
// (Validate); one that is not fails.
func (e *Evaluator) Pool(ctx context.Context, gates []v1alpha1.RolloutGate) []Verdict {
	var out []Verdict
	for i := range gates {
		g := &gates[i]
		var v Verdict
		switch {
		case g.Prometheus != nil:
			v = Verdict{Gate: g.Name, Kind: KindPrometheus}
			v.Message, v.Detail = e.prometheus(ctx, g.Prometheus)
		case g.CEL != nil:
			v = Verdict{Gate: g.Name, Kind: KindCEL}
			v.Message, v.Detail = e.cel(ctx, g.CEL)
		default:
			continue
		}
		v.Pass = v.Message == ""
		out = append(out, v)
	}
	return out
}

// Nodes evaluates the blockingPods gates for nodes: it returns, for each
// node a gate holds, the verdict that holds it. A gate that cannot be
// evaluated holds every node, and is returned as failed too.
func (e *Evaluator) Nodes(ctx context.Context, gates []v1alpha1.RolloutGate, nodes []string) (map[string]Verdict, []Verdict) {
	blocked := map[string]Verdict{}
	var failed []Verdict
	for i := range gates {
		g := &gates[i]
		if g.BlockingPods == nil {
			continue
		}
		found, err := e.blockingPods(ctx, g.BlockingPods, nodes)
		if err != nil {
			v := Verdict{Gate: g.Name, Kind: KindBlockingPods}
			v.Message, v.Detail = unevaluated(err)
			failed = append(failed, v)
			for _, n := range nodes {
				if _, ok := blocked[n]; !ok {
					blocked[n] = v
				}
			}
			continue
		}
		for _, n := range nodes {
			if pod, ok := found[n]; ok {
				if _, ok := blocked[n]; !ok {
					blocked[n] = Verdict{Gate: g.Name, Kind: KindBlockingPods, Message: "pod " + pod + " runs on it"}
				}
			}
		}
	}
	return blocked, failed
}

// HasNodeGates reports whether gates hold any blockingPods gate.
func HasNodeGates(gates []v1alpha1.RolloutGate) bool {
	for i := range gates {
		if gates[i].BlockingPods != nil {
			return true
		}
	}
	return false
}
