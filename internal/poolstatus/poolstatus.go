// Package poolstatus keeps the MachineConfigPool conditions that summarise
// others. Several controllers own parts of a pool's status (render owns
// RenderDegraded, build owns ImageBuildDegraded, rollout owns
// NodeDegraded); each calls SetDegraded after changing its own, so the
// aggregate is always computed the same way.
package poolstatus

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/status"
)

var degradedKinds = []string{v1alpha1.PoolRenderDegraded, v1alpha1.PoolImageBuildDegraded, v1alpha1.PoolNodeDegraded}

// SetDegraded sets the pool's Degraded condition: true when any of
// RenderDegraded, ImageBuildDegraded or NodeDegraded is true, with their
// reasons joined.
func SetDegraded(pool *v1alpha1.MachineConfigPool) {
	var reasons, messages []string
	for _, t := range degradedKinds {
		if c := meta.FindStatusCondition(pool.Status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			reasons = append(reasons, t)
			messages = append(messages, t+": "+c.Message)
		}
	}
	cond := metav1.Condition{Type: v1alpha1.PoolDegraded, ObservedGeneration: pool.Generation}
	if len(reasons) == 0 {
		cond.Status = metav1.ConditionFalse
		cond.Reason = v1alpha1.ReasonAsExpected
		cond.Message = "No part of the pool is degraded"
	} else {
		cond.Status = metav1.ConditionTrue
		cond.Reason = strings.Join(reasons, "And")
		cond.Message = status.Message(strings.Join(messages, "; "))
	}
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
}
