package node

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// waitNewNodes waits for the pool's status.newNodes to be want.
func (f *fixture) waitNewNodes(want *v1alpha1.NewNodeStatus) {
	f.t.Helper()
	testenv.Eventually(f.t, 20*time.Second, "status.newNodes", func() error {
		got := f.poolObj().Status.NewNodes
		switch {
		case got == nil && want == nil:
			return nil
		case got == nil || want == nil || *got != *want:
			return fmt.Errorf("newNodes %+v, want %+v", got, want)
		}
		return nil
	})
}

// TestNewNodesFollowTheRollout (issue 25 point 3): a new node gets the
// image the rollout moves the pool's nodes to, never one awaiting
// approval, and not the one a halted rollout is stuck on.
func TestNewNodesFollowTheRollout(t *testing.T) {
	f := newFixture(t, "newnodes", 3, nil)
	f.layer("rendered-newnodes-1", image('c'))
	ctx := t.Context()
	mosc := &v1alpha1.MachineOSConfig{}
	must(t, env.Client.Get(ctx, client.ObjectKey{Name: "newnodes"}, mosc))
	mosc.Spec.ImageApproval = v1alpha1.ImageApprovalRequired
	must(t, env.Client.Update(ctx, mosc))
	startController(t)

	// Awaiting approval, nothing released yet: nothing for new nodes (the
	// status written with this condition has no newNodes).
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonAwaitingImageApproval, "waits for approval")
	if got := f.poolObj().Status.NewNodes; got != nil {
		t.Fatalf("newNodes %+v while the only image awaits approval", got)
	}

	f.approve("rendered-newnodes-1", metav1.ConditionTrue, v1alpha1.ReasonApproved, "ok")
	first := &v1alpha1.NewNodeStatus{Image: image('c'), Config: "rendered-newnodes-1"}
	f.waitNewNodes(first)
	for i, n := range f.nodes {
		f.waitTaken("rendered-newnodes-1", image('c'), i+1)
		f.finish(n)
	}
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "")

	// A newer build awaiting approval changes nothing for new nodes.
	f.rendered("rendered-newnodes-2")
	f.setConfig("rendered-newnodes-2")
	f.build("rendered-newnodes-2", image('d'), true)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonAwaitingImageApproval, "newnodes-rendered-newnodes-2")
	if got := f.poolObj().Status.NewNodes; got == nil || *got != *first {
		t.Fatalf("newNodes %+v while the new image awaits approval, want %+v", got, first)
	}

	// Approved, it rolls out, and new nodes get it at once.
	f.approve("rendered-newnodes-2", metav1.ConditionTrue, v1alpha1.ReasonApproved, "ok")
	taken := f.waitTaken("rendered-newnodes-2", image('d'), 1)
	f.waitNewNodes(&v1alpha1.NewNodeStatus{Image: image('d'), Config: "rendered-newnodes-2"})

	// The first node fails on it (rolled back to the first image): the
	// rollout halts, and new nodes get the first image again.
	f.annotate(taken[0], v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded, v1alpha1.ReasonAnnotation, "image failed its health check; rolled back")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRolloutHalted, "halted")
	f.waitNewNodes(first)
}

// TestNewNodesIgnoreWhatDaemonsReport (issue 37 finding 2): one node's
// daemon token cannot choose the image of the pool's new nodes. The node
// reports Done until every other node is updated, then Degraded on an
// image and config of its choice, the only node off the target: the
// halted rollout still gives new nodes the release before the target.
func TestNewNodesIgnoreWhatDaemonsReport(t *testing.T) {
	f := newFixture(t, "forged", 3, nil)
	f.layer("rendered-forged-1", image('c'))
	startController(t)
	first := &v1alpha1.NewNodeStatus{Image: image('c'), Config: "rendered-forged-1"}
	f.waitNewNodes(first)
	for i, n := range f.nodes {
		f.waitTaken("rendered-forged-1", image('c'), i+1)
		f.finish(n)
	}
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "")

	f.rendered("rendered-forged-2")
	f.setConfig("rendered-forged-2")
	f.build("rendered-forged-2", image('d'), true)
	var taken []string
	for i := range f.nodes {
		taken = f.waitTaken("rendered-forged-2", image('d'), i+1)
		if i < len(f.nodes)-1 {
			f.finish(taken[i])
		}
	}
	f.waitNewNodes(&v1alpha1.NewNodeStatus{Image: image('d'), Config: "rendered-forged-2"})
	attacker := taken[len(taken)-1]
	f.annotate(attacker,
		v1alpha1.CurrentImageAnnotation, image('e'), v1alpha1.CurrentConfigAnnotation, "rendered-forged-evil",
		v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded, v1alpha1.ReasonAnnotation, "rolled back")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRolloutHalted, "halted")
	f.waitNewNodes(first)
}
