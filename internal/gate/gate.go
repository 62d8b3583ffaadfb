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
	// evaluated); empty when it passes.
	Message string
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
	// Reader reads the gates' objects, pods, namespaces and the CA and
	// token Secrets and ConfigMaps. The rollout controller passes an
	// uncached reader: these are few reads of kinds it does not watch.
	Reader client.Reader
	// Namespace holds the Secrets and ConfigMaps the gates name
	// (strata-system).
	Namespace string
	// Timeout bounds each gate; zero is DefaultTimeout.
	Timeout time.Duration
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
			v.Message = e.prometheus(ctx, g.Prometheus)
		case g.CEL != nil:
			v = Verdict{Gate: g.Name, Kind: KindCEL}
			v.Message = e.cel(ctx, g.CEL)
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
			v := Verdict{Gate: g.Name, Kind: KindBlockingPods, Message: err.Error()}
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
