package render

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/history"
	"github.com/strata-dev/strata/internal/status"
)

// DefaultHistory is how many rendered configs a pool keeps besides the ones
// in use, so that a rollback to a recent configuration finds it.
const DefaultHistory = 5

// nodeConfigIndex indexes Nodes by the rendered configs they run or are
// to run (their current and desired config annotations), so that "does a
// node use this config" is one lookup, not a scan of every node.
const nodeConfigIndex = "strata.render.nodeConfig"

// GCReconciler deletes the rendered configs a pool no longer needs: those
// that are neither its current one nor named by any node as current or
// desired, beyond the newest History of them. It is apart from Reconciler
// so that rendering never waits on nodes and a node's progress re-renders
// nothing.
type GCReconciler struct {
	Client client.Client
	// History is how many unused rendered configs to keep per pool;
	// zero means DefaultHistory.
	History int
}

// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// SetupWithManager registers the reconciler: a pool is reconciled when it
// gets a new rendered config (the previous one may now be unused), when a
// rendered config it owns is created, and when a node stops naming one of
// its rendered configs (moves on, or is deleted). A node that starts
// naming a config frees nothing, so it reconciles no pool.
func (r *GCReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Node{}, nodeConfigIndex, configsOfNode); err != nil {
		return fmt.Errorf("index nodes by rendered config: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("render-gc").
		For(&v1alpha1.MachineConfigPool{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, n := e.ObjectOld.(*v1alpha1.MachineConfigPool), e.ObjectNew.(*v1alpha1.MachineConfigPool)
				return o.Status.Configuration.Name != n.Status.Configuration.Name
			},
			// Owner references take a deleted pool's configs with it.
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Owns(&v1alpha1.MachineConfig{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Watches(&corev1.Node{}, r.poolsOfReleasedConfigs()).
		Complete(r)
}

// configsOfNode are the rendered configs a node runs or is to run.
func configsOfNode(o client.Object) []string {
	var names []string
	for _, a := range []string{v1alpha1.CurrentConfigAnnotation, v1alpha1.DesiredConfigAnnotation} {
		if v := o.GetAnnotations()[a]; v != "" && !slices.Contains(names, v) {
			names = append(names, v)
		}
	}
	return names
}

// poolsOfReleasedConfigs maps a node that stopped naming rendered configs
// (an update that changed its current or desired config, or its deletion)
// to the pools that own those configs, by their PoolLabel: a node moved
// to another pool may release a config of its former pool.
func (r *GCReconciler) poolsOfReleasedConfigs() handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], released []string) {
		for _, name := range released {
			mc := &v1alpha1.MachineConfig{}
			if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
				if !apierrors.IsNotFound(err) {
					log.FromContext(ctx).Error(err, "Cannot find the pool of a rendered config a node released", "renderedConfig", name)
				}
				continue
			}
			if p := mc.Labels[v1alpha1.PoolLabel]; p != "" {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: p}})
			}
		}
	}
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			now := configsOfNode(e.ObjectNew)
			var released []string
			for _, c := range configsOfNode(e.ObjectOld) {
				if !slices.Contains(now, c) {
					released = append(released, c)
				}
			}
			enqueue(ctx, q, released)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, configsOfNode(e.Object))
		},
	}
}

// Reconcile collects the pool's unused rendered configs.
func (r *GCReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &v1alpha1.MachineConfigPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	return status.QuietConflict(ctx, ctrl.Result{}, r.collectGarbage(ctx, pool))
}

// collectGarbage deletes the pool's rendered configs that are neither its
// current one nor named by any node as current or desired, beyond the
// newest History of them. Nodes of every pool are asked: a node moved to
// another pool may still run this pool's config.
func (r *GCReconciler) collectGarbage(ctx context.Context, pool *v1alpha1.MachineConfigPool) error {
	var owned v1alpha1.MachineConfigList
	if err := r.Client.List(ctx, &owned, client.MatchingLabels{v1alpha1.PoolLabel: pool.Name}); err != nil {
		return fmt.Errorf("list rendered configs of pool %s: %w", pool.Name, err)
	}
	var candidates []v1alpha1.MachineConfig
	for _, mc := range owned.Items {
		if metav1.IsControlledBy(&mc, pool) && mc.Name != pool.Status.Configuration.Name {
			candidates = append(candidates, mc)
		}
	}
	keep := r.History
	if keep <= 0 {
		keep = DefaultHistory
	}
	// Fewer than History besides the current one: nothing to delete,
	// whatever the nodes use.
	if len(candidates) <= keep {
		return nil
	}
	// Newest first, by the nanosecond creation annotation; the name breaks
	// ties so that every run picks the same ones.
	slices.SortFunc(candidates, func(a, b v1alpha1.MachineConfig) int { return history.NewestFirst(&a, &b) })
	unused := 0
	for i := range candidates {
		mc := &candidates[i]
		used, err := r.namedByNodes(ctx, mc.Name)
		if err != nil {
			return err
		}
		if used {
			continue
		}
		if unused++; unused <= keep {
			continue
		}
		switch err := r.Client.Delete(ctx, mc, client.Preconditions{UID: &mc.UID}); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("delete old rendered config %s: %w", mc.Name, err)
		default:
			log.FromContext(ctx).Info("Deleted an unused rendered config", "renderedConfig", mc.Name, "history", keep)
		}
	}
	return nil
}

// namedByNodes says whether any node runs the rendered config or is to
// run it; the index answers without listing nodes.
func (r *GCReconciler) namedByNodes(ctx context.Context, config string) (bool, error) {
	var list corev1.NodeList
	if err := r.Client.List(ctx, &list, client.MatchingFields{nodeConfigIndex: config}, client.UnsafeDisableDeepCopy, client.Limit(1)); err != nil {
		return false, fmt.Errorf("find nodes on rendered config %s: %w", config, err)
	}
	return len(list.Items) > 0, nil
}
