package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// waitCanary waits for the pool's status.canary to be in phase, with the
// soak ending at until (zero: no soak recorded).
func (f *fixture) waitCanary(phase v1alpha1.CanaryPhase, updated int32, until time.Time) {
	f.t.Helper()
	eventually(f.t, "pool "+f.pool+" canary "+string(phase), func() error {
		c := f.poolObj().Status.Canary
		if c == nil {
			return fmt.Errorf("no canary status")
		}
		var got time.Time
		if c.SoakUntil != nil {
			got = c.SoakUntil.Time
		}
		if c.Phase != phase || c.UpdatedMachineCount != updated || !got.Equal(until) {
			return fmt.Errorf("canary %s, %d updated, soak until %s; want %s, %d, %s", c.Phase, c.UpdatedMachineCount, got, phase, updated, until)
		}
		return nil
	})
}

// TestCanarySoaksThenTheRestFollows (issue 23 point 3): the canary's node
// updates first, the pool soaks for soakTime by the controller's clock
// with no other node taken, and the reconcile asks to come back exactly at
// the soak's end; then the rest follows.
func TestCanarySoaksThenTheRestFollows(t *testing.T) {
	f := newFixture(t, "canary", 3, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
		p.Spec.Canary = &v1alpha1.Canary{Count: ptr(int32(1)), SoakTime: metav1.Duration{Duration: time.Hour}}
	})
	cfg := "rendered-canary-1"
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	startControllerWithClock(t, clk)
	f.layer(cfg, image('c'))

	// maxUnavailable 2, but the canary is one node.
	first := f.waitTaken(cfg, image('c'), 1)
	if first[0] != "canary-0" {
		t.Fatalf("took %v first, want the canary canary-0", first)
	}
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonCanaryUpdating, "0 of its 1 nodes run")
	f.waitCanary(v1alpha1.CanaryUpdating, 0, time.Time{})

	f.finish(first[0])
	until := t0.Add(time.Hour)
	f.waitCanary(v1alpha1.CanarySoaking, 1, until)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonCanarySoaking, "soaking until 2026-11-27T10:00:00Z")
	f.waitCondition(v1alpha1.PoolUpdating, "True", v1alpha1.ReasonCanarySoaking, "")
	if got := f.taken(cfg, image('c')); len(got) != 1 {
		t.Fatalf("taken %v while the canary soaks", got)
	}

	// No watch sees the soak end: the reconcile comes back at it. A
	// reconcile by hand is synchronous, so what it did not take it did
	// not take.
	r := &Reconciler{Client: env.Client, Recorder: events.NewFakeRecorder(10), Clock: clk}
	for _, at := range []time.Duration{20 * time.Minute, time.Hour - time.Second} {
		clk.SetTime(t0.Add(at))
		res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: f.pool}})
		must(t, err)
		if want := time.Hour - at; res.RequeueAfter != want {
			t.Errorf("at +%s: requeue after %s while soaking, want %s (the soak's end)", at, res.RequeueAfter, want)
		}
		if got := f.taken(cfg, image('c')); len(got) != 1 {
			t.Fatalf("at +%s: taken %v while the canary soaks", at, got)
		}
	}

	clk.SetTime(until)
	f.tick(2)
	f.waitTaken(cfg, image('c'), 3)
	f.waitCanary(v1alpha1.CanaryDone, 1, until)
}

// TestCanaryFailureHaltsThePool (issue 23 point 3): a canary node that
// fails the target during the soak halts the pool although
// maxFailedNodes is 2, as maxFailedNodes would halt it, and the soak's
// end does not release it.
func TestCanaryFailureHaltsThePool(t *testing.T) {
	f := newFixture(t, "canfail", 3, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.MaxFailedNodes = ptr(int32(2))
		p.Spec.Canary = &v1alpha1.Canary{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "yes"}},
			SoakTime: metav1.Duration{Duration: 10 * time.Minute}}
	})
	f.nodes = append(f.nodes, f.addNode("canfail-z", map[string]string{"test-pool": f.pool, "canary": "yes"}, image('0')))
	cfg := "rendered-canfail-1"
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	startControllerWithClock(t, clk)
	f.layer(cfg, image('f'))

	// The selected node goes first, though last by name.
	if got := f.waitTaken(cfg, image('f'), 1); got[0] != "canfail-z" {
		t.Fatalf("took %v, want the selected canfail-z", got)
	}
	f.finish("canfail-z")
	f.waitCanary(v1alpha1.CanarySoaking, 1, t0.Add(10*time.Minute))

	// Its daemon reports the update failed (the boot check rolled it
	// back) while the pool soaks.
	f.annotate("canfail-z", v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded,
		v1alpha1.ReasonAnnotation, "boot check: the daemon never reported healthy; rolled back")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRolloutHalted, "1 nodes failed during the canary or its soak")
	f.waitCondition(v1alpha1.PoolNodeDegraded, "True", v1alpha1.ReasonNodesDegraded, "Rollout halted. node canfail-z: boot check")

	// Past the soak's end, a reconcile (by hand: synchronous) still takes
	// nothing.
	clk.SetTime(t0.Add(time.Hour))
	r := &Reconciler{Client: env.Client, Recorder: events.NewFakeRecorder(10), Clock: clk}
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: f.pool}})
	must(t, err)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRolloutHalted, "during the canary")
	if got := f.taken(cfg, image('f')); len(got) != 1 {
		t.Fatalf("taken %v after a canary failure, want only canfail-z", got)
	}
}

// stagedAhead lists the nodes with a desiredStage annotation, and its
// values.
func (f *fixture) stagedAhead() map[string]string {
	out := map[string]string{}
	for _, name := range f.nodes {
		if v, ok := f.node(name).Annotations[v1alpha1.DesiredStageAnnotation]; ok {
			out[name] = v
		}
	}
	return out
}

func (f *fixture) waitStage(want ...string) {
	f.t.Helper()
	eventually(f.t, fmt.Sprintf("desiredStage on %v", want), func() error {
		got := f.stagedAhead()
		var names []string
		for n := range got {
			names = append(names, n)
		}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			return fmt.Errorf("desiredStage on %v", got)
		}
		return nil
	})
}

// TestStageAheadAnnotations (issue 21 point 6): with stageAhead 2 the
// controller asks the two nodes next in turn to download the image
// ahead, with the pull secret; a node's turn removes its request and
// passes it on, never to more than two; the daemons' reports are counted
// in the status; stageAhead 0 clears every request.
func TestStageAheadAnnotations(t *testing.T) {
	f := newFixture(t, "ahead", 5, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.StageAhead = ptr(int32(2))
	})
	cfg := "rendered-ahead-1"
	startController(t)
	f.layer(cfg, image('d'))

	if got := f.waitTaken(cfg, image('d'), 1); got[0] != "ahead-0" {
		t.Fatalf("took %v, want ahead-0", got)
	}
	f.waitStage("ahead-1", "ahead-2")
	for _, n := range []string{"ahead-1", "ahead-2"} {
		a := f.node(n).Annotations
		if a[v1alpha1.DesiredStageAnnotation] != image('d') || a[v1alpha1.ImagePullSecretAnnotation] != "pull" {
			t.Errorf("node %s: desiredStage %q, imagePullSecret %q; want %s and pull", n,
				a[v1alpha1.DesiredStageAnnotation], a[v1alpha1.ImagePullSecretAnnotation], image('d'))
		}
	}
	// The daemons stage and report it.
	f.annotate("ahead-1", v1alpha1.StagedImageAnnotation, image('d'))
	f.annotate("ahead-2", v1alpha1.StagedImageAnnotation, image('d'))
	eventually(t, "stagedAheadMachineCount 2", func() error {
		if n := f.poolObj().Status.StagedAheadMachineCount; n != 2 {
			return fmt.Errorf("stagedAheadMachineCount %d", n)
		}
		return nil
	})
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut, "2 nodes hold the image staged ahead")

	// Each turn takes a staged node and passes the request on; at no
	// observation more than two nodes are asked.
	for i, next := range [][]string{{"ahead-2", "ahead-3"}, {"ahead-3", "ahead-4"}} {
		taken := f.taken(cfg, image('d'))
		f.finish(taken[len(taken)-1])
		f.waitTaken(cfg, image('d'), i+2)
		f.waitStage(next...)
		if got := f.stagedAhead(); len(got) > 2 {
			t.Fatalf("desiredStage on %v, more than stageAhead 2", got)
		}
		if _, ok := f.node(fmt.Sprintf("ahead-%d", i+1)).Annotations[v1alpha1.DesiredStageAnnotation]; ok {
			t.Errorf("ahead-%d was taken and still asked to stage ahead", i+1)
		}
	}

	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := f.poolObj()
		p.Spec.StageAhead = ptr(int32(0))
		return env.Client.Update(context.Background(), p)
	}))
	f.waitStage()
}

func ptr[T any](v T) *T { return &v }
