package rollout

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultResync is how often the daemon syncs without a Node event:
// bootc's state, the boot id and the health check change without one.
const DefaultResync = 10 * time.Second

// DefaultRebootWait is how long the daemon waits to be killed by the
// reboot it asked for before it asks again.
const DefaultRebootWait = 15 * time.Minute

// CacheOptions restricts a manager's cache to the daemon's own Node, so
// that the daemon neither needs nor holds a view of other nodes.
func CacheOptions(nodeName string) cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Node{}: {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
	}}
}

// The daemon's rights: Nodes (RBAC cannot narrow them to the daemon's own
// Node; only admission control on the node name in its token can) and
// Events about its Node. It evicts nothing: the controller drains.
//
// No MachineConfig and no Secret: every daemon shares this
// ServiceAccount, so RBAC would let root on one node read every pool's
// rendered configs and node pull secrets by name. The daemon reads its
// own from the config server (Inputs, configserver.NodeServer), which
// serves a token bound to a pod on a Node only what the controller named
// on that Node, and rendered configs of its pool.
//
// MachineConfigurations: get, of the `cluster` singleton only, whose
// disruption policy decides what an update costs the node; the daemon
// reads it uncached once per image update, so it needs no list or watch.
//
// Events: the events API records an Event about a cluster-scoped object
// (the daemon's Node) in namespace default, so the daemon may create them
// there and nowhere else.
//
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigurations,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,namespace=default,resources=events,verbs=create;patch

// Reconciler runs the Daemon's sync for its Node in a controller-runtime
// manager whose cache CacheOptions restricts.
type Reconciler struct {
	Daemon *Daemon
	// Resync is the period of syncs without events; 0 means
	// DefaultResync.
	Resync time.Duration
	// RebootWait is how long a sync waits for the reboot it asked for;
	// 0 means DefaultRebootWait.
	RebootWait time.Duration
}

// SetupWithManager registers the reconciler for the daemon's Node. One
// sync runs at a time; a failed one is retried after 1 s, doubling to
// 2 min. The echo of the daemon's own annotation patch starts no sync
// (echo.go).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	name := r.Daemon.NodeName
	return ctrl.NewControllerManagedBy(mgr).
		Named("strata-daemon").
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == name
		}), predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			before, _ := e.ObjectOld.(*corev1.Node)
			after, _ := e.ObjectNew.(*corev1.Node)
			return !r.Daemon.own.echo(before, after)
		}})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: 1,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 2*time.Minute),
		}).
		Complete(r)
}

// SyncAtStart runs the daemon's first sync before the manager starts,
// reading the Node through the uncached Reader: after a reboot the
// update's verification and its report need not wait for the node
// cache, which controller-runtime polls for its sync (0.2 s of every
// start, measured under a rollout's load, on the path of every node's
// update). Writes do not go through the cache, so the manager's client
// makes them before it starts. The Reconciler's syncs follow, reading
// the cached Node; a reboot this sync asked for is waited for by the
// first of them. It returns once the sync's MachineConfigNode writes are
// done.
func (d *Daemon) SyncAtStart(ctx context.Context) (Result, error) {
	defer d.mirrored()
	return d.sync(ctx, d.reader())
}

// Reconcile syncs the node. After the reboot command it blocks until the
// reboot kills the daemon, or until RebootWait passes.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	res, err := r.Daemon.Sync(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if res.Rebooting {
		wait := r.RebootWait
		if wait <= 0 {
			wait = DefaultRebootWait
		}
		log.FromContext(ctx).Info("Waiting for the reboot", "timeout", wait.String())
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctrl.Result{}, nil
		case <-t.C:
			r.Daemon.RebootTimedOut()
			return ctrl.Result{}, fmt.Errorf("the node did not reboot within %s of the reboot command", wait)
		}
	}
	resync := r.Resync
	if resync <= 0 {
		resync = DefaultResync
	}
	if res.RequeueAfter > 0 && res.RequeueAfter < resync {
		resync = res.RequeueAfter
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}
