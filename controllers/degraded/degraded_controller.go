// Package degraded owns a MachineConfigPool's aggregate Degraded
// condition. The render, build and rollout controllers each own one
// condition saying what of theirs is degraded (RenderDegraded,
// ImageBuildDegraded, NodeDegraded); this controller alone writes the
// summary, computed by poolstatus.Degraded, whenever one of them changes.
// One writer means the summary never lags behind a part written
// concurrently by another controller.
package degraded

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/internal/poolstatus"
)

// Reconciler writes each pool's Degraded condition.
type Reconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools/status,verbs=get;update;patch

// SetupWithManager registers the reconciler: a pool is reconciled when it
// is created and when a condition Degraded summarises, or its generation,
// changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("pool-degraded").
		For(&v1alpha1.MachineConfigPool{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return poolstatus.DegradedInputsChanged(e.ObjectOld.(*v1alpha1.MachineConfigPool), e.ObjectNew.(*v1alpha1.MachineConfigPool))
			},
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Complete(r)
}

// Reconcile computes the pool's Degraded condition and writes it when it
// changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &v1alpha1.MachineConfigPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetPool(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		metrics.ForgetPool(pool.Name)
		return ctrl.Result{}, nil
	}
	next := pool.DeepCopy()
	meta.SetStatusCondition(&next.Status.Conditions, poolstatus.Degraded(pool))
	if err := poolstatus.Aggregate.Apply(ctx, r.Client, pool, next); err != nil {
		return ctrl.Result{}, err
	}
	setMetrics(next)
	return ctrl.Result{}, nil
}

// degradedConditions are the pool's conditions strata_pool_degraded
// reports: the summary and each part it summarises.
var degradedConditions = []string{v1alpha1.PoolDegraded, v1alpha1.PoolRenderDegraded, v1alpha1.PoolImageBuildDegraded, v1alpha1.PoolNodeDegraded}

// setMetrics sets strata_pool_degraded from the pool's conditions as
// written. This controller is reconciled whenever one of them changes.
func setMetrics(pool *v1alpha1.MachineConfigPool) {
	for _, c := range degradedConditions {
		metrics.SetPoolDegraded(pool.Name, c, meta.IsStatusConditionTrue(pool.Status.Conditions, c))
	}
}
