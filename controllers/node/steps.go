package node

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node/plan"
)

// planSteps is the planner's view of spec.progressive, with the soak
// status.progressive recorded if it is of target; nil without one.
func planSteps(pool *v1alpha1.MachineConfigPool, target plan.Target) *plan.Steps {
	p := pool.Spec.Progressive
	if p == nil {
		return nil
	}
	out := &plan.Steps{SuccessThreshold: p.SuccessThreshold}
	for _, st := range p.Steps {
		step := plan.Step{Size: &st.Nodes}
		if st.SoakTime != nil {
			step.Soak = st.SoakTime.Duration
		}
		out.Steps = append(out.Steps, step)
	}
	if st := pool.Status.Progressive; st != nil && st.SoakStartedAt != nil &&
		st.TargetConfig == target.Config && st.TargetImage == target.Image {
		out.SoakStep, out.SoakStartedAt = int(st.Step)-1, st.SoakStartedAt.Time
	}
	return out
}

// stepsError says which step of spec.progressive does not grow, naming
// its field; "" when they all do. Counts are compared with counts and
// percentages with percentages: a count and a percentage compare only
// against the pool's size, which changes. (The API server cannot check
// this: a rule over the list exceeds its cost budget.)
func stepsError(p *v1alpha1.ProgressiveRollout) string {
	if p == nil {
		return ""
	}
	for i := 1; i < len(p.Steps); i++ {
		a, b := p.Steps[i-1].Nodes, p.Steps[i].Nodes
		if a.Type != b.Type {
			continue
		}
		av, aok := stepValue(a)
		bv, bok := stepValue(b)
		if aok && bok && bv <= av {
			return fmt.Sprintf("spec.progressive.steps[%d].nodes: %s is not more than the step before (%s): steps must grow", i, b.String(), a.String())
		}
	}
	return ""
}

func stepValue(v intstr.IntOrString) (int, bool) {
	if v.Type == intstr.Int {
		return v.IntValue(), true
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	return n, err == nil
}

// progressiveStatus is status.progressive: absent without steps, or
// without a target to measure nodes against.
func progressiveStatus(s *scope) *v1alpha1.ProgressiveStatus {
	st := s.result.Step
	if st == nil {
		return nil
	}
	out := &v1alpha1.ProgressiveStatus{Step: int32(st.Index + 1), Steps: int32(st.Count), Phase: st.Phase,
		TargetConfig: s.target.Config, TargetImage: s.target.Image,
		StepMachineCount: int32(st.Size), SentMachineCount: int32(st.Sent)}
	if !st.SoakStartedAt.IsZero() {
		out.SoakStartedAt = &metav1.Time{Time: st.SoakStartedAt}
		out.SoakUntil = &metav1.Time{Time: st.SoakUntil}
	}
	return out
}
