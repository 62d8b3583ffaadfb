package node

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// A pool with a zone topology takes at most one node per zone at once,
// although its own maxUnavailable would allow all four; a node an admin
// holds is never taken, is named with its reason in the pool's Updated
// condition, and the rest of the pool finishes; released, it follows.
func TestTopologyBudgetsAndHeldNode(t *testing.T) {
	f := newFixture(t, "topo", 0, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.MaxUnavailable = ptrIntOrString(intstr.FromInt32(4))
		p.Spec.Topology = &v1alpha1.RolloutTopology{Key: "topology.kubernetes.io/zone", MaxUnavailable: ptrIntOrString(intstr.FromInt32(1))}
	})
	for i, zone := range []string{"a", "a", "b", "b", "b"} {
		labels := map[string]string{"test-pool": "topo", "topology.kubernetes.io/zone": zone}
		f.nodes = append(f.nodes, f.addNode("topo-"+string(rune('0'+i)), labels, image('0')))
	}
	// topo-2 is held before anything starts.
	f.annotate("topo-2", v1alpha1.HoldAnnotation, "disk replacement, ticket 4711")
	cfg := "rendered-topo-1"
	f.layer(cfg, image('a'))
	startController(t)

	first := f.waitTaken(cfg, image('a'), 2)
	if !slices.Equal(first, []string{"topo-0", "topo-3"}) {
		t.Fatalf("first batch %v, want one node of each zone, the held topo-2 passed over: [topo-0 topo-3]", first)
	}
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut, "topo-2 (disk replacement, ticket 4711)")
	f.finish("topo-0")
	f.finish("topo-3")
	f.waitTaken(cfg, image('a'), 4)
	if got := f.taken(cfg, image('a')); slices.Contains(got, "topo-2") {
		t.Fatalf("the held node was taken: %v", got)
	}
	f.finish("topo-1")
	f.finish("topo-4")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut, "4 of 5 nodes run")
	if p := f.poolObj(); condition(p, v1alpha1.PoolDegraded).Status == "True" || strings.Contains(condition(p, v1alpha1.PoolUpdated).Message, "failed") {
		t.Fatalf("a held node counts as a failure: %+v", p.Status.Conditions)
	}

	f.annotate("topo-2", v1alpha1.HoldAnnotation, "")
	f.waitTaken(cfg, image('a'), 5)
	f.finish("topo-2")
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "All 5 nodes run")
}
