package render

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/retry"
	"github.com/strata-dev/strata/internal/status"
	"github.com/strata-dev/strata/nodeconfig"
)

// setStatus computes the parts of the pool's status this controller owns
// (poolstatus.Render): the configuration and the RenderDegraded
// condition. On a render error the configuration is left as it
// was: the pool keeps its last good configuration.
func setStatus(pool *v1alpha1.MachineConfigPool, rendered *v1alpha1.MachineConfig, sources []v1alpha1.MachineConfig, renderErr error) {
	pool.Status.ObservedGeneration = pool.Generation
	cond := metav1.Condition{
		Type:               v1alpha1.PoolRenderDegraded,
		ObservedGeneration: pool.Generation,
	}
	if renderErr != nil {
		cond.Status = metav1.ConditionTrue
		cond.Reason = inputReason(renderErr)
		cond.Message = status.Message(renderErr.Error())
	} else {
		cond.Status = metav1.ConditionFalse
		cond.Reason = v1alpha1.ReasonRendered
		if len(sources) == 0 {
			cond.Reason = v1alpha1.ReasonNoConfigSelected
		}
		cond.Message = fmt.Sprintf("Rendered %s from %d MachineConfigs", rendered.Name, len(sources))
		if w := sourceWarnings(sources); len(w) > 0 {
			cond.Reason = v1alpha1.ReasonRenderedWithWarnings
			cond.Message += "; accepted and ignored, as OpenShift does: " + strings.Join(w, "; ")
		}
		refs := make([]corev1.ObjectReference, len(sources))
		for i := range sources {
			refs[i] = corev1.ObjectReference{
				APIVersion: v1alpha1.GroupVersion.String(),
				Kind:       "MachineConfig",
				Name:       sources[i].Name,
			}
		}
		pool.Status.Configuration = v1alpha1.MachineConfigPoolStatusConfiguration{Name: rendered.Name, Source: refs}
	}
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
}

// sourceWarnings are what the pool's MachineConfigs hold that is accepted
// but ignored (nodeconfig.Warnings), each naming its MachineConfig and
// field, so that someone who applied them with kubectl hears of them as
// stratactl render's user does.
func sourceWarnings(sources []v1alpha1.MachineConfig) []string {
	var out []string
	for i := range sources {
		for _, w := range nodeconfig.Warnings(&sources[i].Spec, field.NewPath("spec")) {
			out = append(out, "MachineConfig "+sources[i].Name+": "+w)
		}
	}
	return out
}

// setRetrying is the pool's RenderDegraded condition when the render could
// not be done for a reason that may heal by itself (a read or a write the
// API server did not answer): reason Retrying, with the error and the next
// try's time, and the status it had, which nothing read contradicts
// (Unknown when it has none yet). The configuration stays as it was.
func setRetrying(pool *v1alpha1.MachineConfigPool, a *retry.Attempt) {
	cond := metav1.Condition{Type: v1alpha1.PoolRenderDegraded, Status: metav1.ConditionUnknown, ObservedGeneration: pool.Generation,
		Reason: v1alpha1.ReasonRetrying, Message: status.Message(a.Message())}
	if old := meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.PoolRenderDegraded); old != nil {
		cond.Status = old.Status
	}
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
}
