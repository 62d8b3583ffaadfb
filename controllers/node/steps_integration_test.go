package node

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node/plan"
)

// A progressive rollout sends one node first, records its soak in
// status.progressive, and sends the rest (two at a time) only when the
// soak is over.
func TestProgressiveRolloutSoaksBetweenSteps(t *testing.T) {
	f := newFixture(t, "prog", 3, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
		p.Spec.Progressive = &v1alpha1.ProgressiveRollout{Steps: []v1alpha1.RolloutStep{
			{Nodes: intstr.FromInt32(1), SoakTime: &metav1.Duration{Duration: 3 * time.Second}},
			{Nodes: intstr.FromString("100%")},
		}}
	})
	cfg := "rendered-prog-1"
	f.layer(cfg, image('d'))
	startController(t)

	if got := f.waitTaken(cfg, image('d'), 1); got[0] != "prog-0" {
		t.Fatalf("first step %v, want prog-0", got)
	}
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut, "step 1 of 2: 1 of its 1 nodes sent")
	f.finish("prog-0")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut, "Step 1 of 2 is done")
	p := f.poolObj()
	st := p.Status.Progressive
	if st == nil || st.Phase != plan.StepSoaking || st.Step != 1 || st.SoakStartedAt == nil || st.TargetImage != image('d') {
		t.Fatalf("status.progressive %+v, want step 1 Soaking with its start", st)
	}
	if got := f.taken(cfg, image('d')); len(got) != 1 {
		t.Fatalf("taken %v during the soak", got)
	}
	f.waitTaken(cfg, image('d'), 3)
	if time.Since(st.SoakStartedAt.Time) < 3*time.Second {
		t.Errorf("the next step started %s after the soak's start, before its 3s", time.Since(st.SoakStartedAt.Time))
	}
	f.finish("prog-1")
	f.finish("prog-2")
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "")
}

// Steps that do not grow hold every node, with the step named.
func TestStepsOutOfOrderHoldThePool(t *testing.T) {
	f := newFixture(t, "badsteps", 2, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.Progressive = &v1alpha1.ProgressiveRollout{Steps: []v1alpha1.RolloutStep{
			{Nodes: intstr.FromString("50%")}, {Nodes: intstr.FromString("25%")},
		}}
	})
	cfg := "rendered-badsteps-1"
	f.layer(cfg, image('c'))
	startController(t)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonInvalidSteps, "spec.progressive.steps[1].nodes: 25% is not more than the step before (50%)")
	if got := f.taken(cfg, image('c')); len(got) != 0 {
		t.Fatalf("taken %v with steps out of order", got)
	}
}
