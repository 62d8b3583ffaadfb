package nodemetrics

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/strata-dev/strata/internal/metrics"
)

// Tracker follows every Node's updates and records their metrics.
type Tracker struct {
	// Clock times the phases; nil is the real clock.
	Clock clock.PassiveClock

	mu    sync.Mutex
	nodes map[string]*track
	// synced tells whether the handler has seen the informer's initial
	// list; nil until it is registered.
	synced func() bool
}

// Synced tells whether the tracker follows every node: it runs and has
// seen each node once. An update that starts after it is timed.
func (t *Tracker) Synced() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.synced != nil && t.synced()
}

// SetupWithManager adds the tracker to the manager: it runs on the
// leader, from the manager's Node informer (the rollout controller's
// stripped cache keeps every annotation it reads).
func (t *Tracker) SetupWithManager(mgr ctrl.Manager) error {
	if t.Clock == nil {
		t.Clock = clock.RealClock{}
	}
	t.nodes = map[string]*track{}
	return mgr.Add(&runnable{t: t, mgr: mgr})
}

// runnable registers the tracker's handler once this replica leads.
type runnable struct {
	t   *Tracker
	mgr ctrl.Manager
}

// NeedLeaderElection: only the leader counts, or two replicas would count
// every update twice.
func (*runnable) NeedLeaderElection() bool { return true }

func (r *runnable) Start(ctx context.Context) error {
	inf, err := r.mgr.GetCache().GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return fmt.Errorf("node informer for the update metrics: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				r.t.observe(nil, n)
			}
		},
		UpdateFunc: func(o, n any) {
			on, ok1 := o.(*corev1.Node)
			nn, ok2 := n.(*corev1.Node)
			if ok1 && ok2 {
				r.t.observe(on, nn)
			}
		},
		DeleteFunc: func(o any) {
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			if n, ok := o.(*corev1.Node); ok {
				r.t.forget(n.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch nodes for the update metrics: %w", err)
	}
	r.t.mu.Lock()
	r.t.synced = reg.HasSynced
	r.t.mu.Unlock()
	<-ctx.Done()
	return inf.RemoveEventHandler(reg)
}

// observe records what changed from old (nil: first seen) to n.
func (t *Tracker) observe(old, n *corev1.Node) {
	var ov *view
	if old != nil {
		v := viewOf(old)
		ov = &v
	}
	t.mu.Lock()
	tr, obs := step(t.nodes[n.Name], ov, viewOf(n), t.Clock.Now())
	if tr == nil {
		delete(t.nodes, n.Name)
	} else {
		t.nodes[n.Name] = tr
	}
	t.mu.Unlock()
	record(obs)
}

func (t *Tracker) forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.nodes, name)
}

// record writes observations into the metrics.
func record(obs []observation) {
	for _, o := range obs {
		switch o.kind {
		case phaseTook:
			metrics.NodeUpdatePhaseDuration.WithLabelValues(o.pool, o.phase).Observe(o.seconds)
		case updateEnded:
			metrics.NodeUpdates.WithLabelValues(o.pool, o.reboot, o.result).Inc()
		case rolledBack:
			metrics.NodeRollbacks.WithLabelValues(o.pool).Inc()
		case drainEnded:
			metrics.Drains.WithLabelValues(o.pool, o.result).Inc()
		}
	}
}
