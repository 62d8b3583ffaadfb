package node

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node/plan"
	"github.com/strata-dev/strata/internal/gate"
	"github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/internal/poolstatus"
	"github.com/strata-dev/strata/internal/retry"
	"github.com/strata-dev/strata/internal/status"
	"github.com/strata-dev/strata/internal/window"
)

// DefaultHealthCheckTimeout and DefaultDrainTimeout apply when a pool does
// not set its own.
const (
	DefaultHealthCheckTimeout = 10 * time.Minute
	DefaultDrainTimeout       = 10 * time.Minute
	// DefaultGateRecheck is how soon a pool that a gate holds is
	// reconciled again to re-check it: alerts, objects and pods change
	// without an event the controller watches.
	DefaultGateRecheck = 30 * time.Second
)

// Reconciler rolls each MachineConfigPool's nodes to the pool's target.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Clock tells the time that maintenance windows are read against;
	// nil is the real clock. Tests pass a fake one.
	Clock clock.PassiveClock
	// Gates evaluates the pools' spec.gates; nil reads through Client
	// from strata-system.
	Gates *gate.Evaluator
	// GateRecheck is how soon a held pool is checked again; zero is
	// DefaultGateRecheck.
	GateRecheck time.Duration
	// MaxRetryDelay bounds the wait before the next try of a pool whose
	// reconcile failed in a way that may heal by itself (a read or a
	// node's write the API server did not answer): tries back off from
	// half a second, doubling, up to this. Zero is retry.DefaultMaxDelay.
	MaxRetryDelay time.Duration
	// Workers is how many pools are reconciled at once; zero is
	// DefaultWorkers.
	Workers int

	retries retry.Backoff
}

// DefaultWorkers is how many pools are reconciled at once by default:
// enough that a few pools held by slow gates leave the rest going.
const DefaultWorkers = 4

func (r *Reconciler) workers() int {
	if r.Workers <= 0 {
		return DefaultWorkers
	}
	return r.Workers
}

// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigs;machineosconfigs;machineosbuilds,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// What the gates read, and as whom: gates.go.

// SetupWithManager registers the reconciler. A pool is reconciled when it
// changes (its spec, or the rendered config the render controller sets),
// when a node it selects or took changes in what the rollout reads, when
// its MachineOSConfig changes or when one of its builds changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &corev1.Node{}, poolIndex, indexNodeByPool); err != nil {
		return fmt.Errorf("index nodes by pool: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("rollout").
		// Pools are independent: one whose gates are slow (up to the
		// evaluator's budget) must not hold the others' reconciles.
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers()}).
		For(&v1alpha1.MachineConfigPool{}, builder.WithPredicates(poolChanged())).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfNode), builder.WithPredicates(nodeChanged())).
		Watches(&v1alpha1.MachineOSConfig{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.(*v1alpha1.MachineOSConfig).Spec.MachineConfigPool.Name}}}
		})).
		Watches(&v1alpha1.MachineOSBuild{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if p := o.GetLabels()[v1alpha1.PoolLabel]; p != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: p}}}
			}
			return nil
		})).
		Complete(r)
}

// poolChanged passes a pool's spec changes, a new rendered config and a
// claim taken or released (which MachineOSConfig layers it), not the
// status this controller writes itself.
func poolChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*v1alpha1.MachineConfigPool), e.ObjectNew.(*v1alpha1.MachineConfigPool)
			return o.Generation != n.Generation || o.Status.Configuration.Name != n.Status.Configuration.Name ||
				o.Annotations[v1alpha1.LayeredByAnnotation] != n.Annotations[v1alpha1.LayeredByAnnotation] ||
				!equality.Semantic.DeepEqual(o.Labels, n.Labels) || o.DeletionTimestamp != n.DeletionTimestamp
		},
	}
}

// nodeChanged passes what the rollout reads of a node: labels (pool
// membership), annotations (the protocol), readiness and schedulability.
// With the stripped cache, heartbeats change none of them.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
			return isReady(o) != isReady(n) || o.Spec.Unschedulable != n.Spec.Unschedulable ||
				!equality.Semantic.DeepEqual(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.Annotations, n.Annotations)
		},
	}
}

// poolsOfNode maps a node to the pools that select it now and the pool
// that took it (which it may have left).
func (r *Reconciler) poolsOfNode(ctx context.Context, o client.Object) []reconcile.Request {
	n := o.(*corev1.Node)
	var pools v1alpha1.MachineConfigPoolList
	if err := r.Client.List(ctx, &pools); err != nil {
		// The cache answers, so this is rare, but a dropped event leaves
		// the pool waiting for the next one: say so.
		log.FromContext(ctx).Error(err, "Cannot find the pools of a changed node", "node", n.Name)
		return nil
	}
	names := poolSelectors(pools.Items).poolsOf(n)
	if p := n.Annotations[v1alpha1.NodePoolAnnotation]; p != "" {
		names = append(names, p)
	}
	reqs := make([]reconcile.Request, 0, len(names))
	for _, p := range names {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: p}})
	}
	return reqs
}

// scope is one reconcile's inputs and results.
type scope struct {
	pool   *v1alpha1.MachineConfigPool
	target target
	window windowState
	result plan.Result
	// nodes are the pool's nodes as planned.
	nodes []plan.Node
	gates gateState
	// planned: the inputs were read and the rollout planned. Without a
	// plan only retry is known, and the rest of the status stays as it
	// was last written.
	planned bool
	// retry is set when the reconcile failed (an input that could not be
	// read, a node that could not be written) and is tried again.
	retry *retry.Attempt
	// stepsInvalid says which step of spec.progressive does not grow;
	// every node is held while it does.
	stepsInvalid string
	// released is what new nodes of a halted rollout start from
	// (previousRelease); read only when the rollout is halted.
	released *v1alpha1.NewNodeStatus
}

// windowState is the pool's maintenance windows as of this reconcile.
type windowState struct {
	// set: the pool has windows.
	set bool
	// err: they cannot be read; the rollout holds (fail closed).
	err   error
	state window.State
	// loc is the zone times are told in: the first window's.
	loc *time.Location
}

// open says whether a node may start its update now.
func (w windowState) open() bool { return !w.set || (w.err == nil && w.state.Open) }

// Reconcile plans the pool's rollout and writes the nodes' desired state
// and the pool's status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return status.QuietConflict(ctx, res, err)
}

func (r *Reconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &v1alpha1.MachineConfigPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetPool(req.Name)
			r.retries.Forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pool.DeletionTimestamp != nil {
		metrics.ForgetPool(pool.Name)
		r.retries.Forget(pool.Name)
		return ctrl.Result{}, nil
	}
	now := r.clock().Now()
	s := &scope{pool: pool, window: windowsAt(pool, now)}
	nodes, err := r.gather(ctx, s)
	if err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{}, err
		}
		// An input could not be read: nothing is planned, but the pool
		// says what failed and when it is tried again.
		r.failed(ctx, s, err)
		if err := r.writeStatus(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: s.retry.After}, nil
	}
	s.planned = true
	s.gates.invalid = gate.Validate(pool.Spec.Gates)
	pp := planPool(pool, s.window, s.target.Target, now)
	// Steps out of order hold every node, as an invalid gate does.
	s.stepsInvalid = stepsError(pool.Spec.Progressive)
	pp.Held = s.stepsInvalid != ""
	s.result = plan.Plan(pp, s.target.Target, nodes.plan)
	s.nodes = nodes.plan
	// Gates are checked only when a node is about to be taken: a settled
	// pool asks no Prometheus anything.
	if len(pool.Spec.Gates) > 0 && len(s.result.Actions) > 0 {
		s.gates.checked = true
		r.checkGates(ctx, s, nodes)
		pp.Held = s.gates.held() || s.stepsInvalid != ""
		s.result = plan.Plan(pp, s.target.Target, nodes.plan)
	}
	log.FromContext(ctx).V(1).Info("Planned the rollout", "targetConfig", s.target.Config, "targetImage", s.target.Image,
		"waiting", s.target.Waiting, "windowOpen", s.window.open(), "actions", len(s.result.Actions),
		"updated", s.result.UpdatedCount, "machines", s.result.MachineCount, "gateHeld", s.gates.held(), "blocked", len(s.result.Blocked))
	nodeErr := r.apply(ctx, s, nodes.byName)
	setMetrics(s, nodes)
	// A halted rollout's new nodes start from what this controller
	// released before (never from what a node reports), read only when
	// needed: status.newNodes already on the image it is stuck on.
	if prev := pool.Status.NewNodes; s.result.Halted && (prev == nil || prev.Image == s.target.Image) {
		// On an error new nodes get nothing meanwhile, which is safe, and
		// the pool says it is retrying.
		if s.released, err = r.previousRelease(ctx, pool, s.target.Image); err != nil && nodeErr == nil {
			nodeErr = fmt.Errorf("find the release before %s for new nodes: %w", s.target.Image, err)
		}
	}
	if nodeErr != nil && !apierrors.IsConflict(nodeErr) {
		r.failed(ctx, s, nodeErr)
	} else {
		r.retries.Forget(pool.Name)
	}

	if err := r.writeStatus(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	// A window's opening or closing changes nothing a watch sees: come
	// back at that instant, not by polling.
	var res ctrl.Result
	if next := s.window.state.Transition(); s.window.set && s.window.err == nil && !next.IsZero() {
		res.RequeueAfter = next.Sub(now)
	}
	// Nor does a soak's end.
	if c := s.result.Canary; c != nil && c.Phase == v1alpha1.CanarySoaking && c.SoakUntil.After(now) {
		if d := c.SoakUntil.Sub(now); res.RequeueAfter == 0 || d < res.RequeueAfter {
			res.RequeueAfter = d
		}
	}
	if st := s.result.Step; st != nil && st.Phase == plan.StepSoaking && st.SoakUntil.After(now) {
		if d := st.SoakUntil.Sub(now); res.RequeueAfter == 0 || d < res.RequeueAfter {
			res.RequeueAfter = d
		}
	}
	// Nor does a gate's clearing: check again soon. (An invalid gate
	// waits for its fix, a spec change the watch sees.)
	if len(s.gates.holding) > 0 || len(s.result.Blocked) > 0 {
		if d := r.gateRecheck(); res.RequeueAfter == 0 || d < res.RequeueAfter {
			res.RequeueAfter = d
		}
	}
	// Nor does a failed node write's healing.
	if s.retry != nil {
		if d := s.retry.After; res.RequeueAfter == 0 || d < res.RequeueAfter {
			res.RequeueAfter = d
		}
		return res, nil
	}
	// A conflict comes back at once (QuietConflict).
	return res, nodeErr
}

// gather reads the pool's inputs into s: its target and its nodes.
func (r *Reconciler) gather(ctx context.Context, s *scope) (poolNodeSet, error) {
	var err error
	if s.target, err = r.targetFor(ctx, s.pool); err != nil {
		return poolNodeSet{}, err
	}
	return r.poolNodes(ctx, s.pool)
}

// failed records in s a failure that may heal by itself (a cache or API
// read, a node's write), with the next try's time on the controller's own
// bounded backoff: the work queue's grows to minutes and is told nowhere.
// The error is logged here, since the reconcile returns none.
func (r *Reconciler) failed(ctx context.Context, s *scope, err error) {
	s.retry = r.retries.Fail(s.pool.Name, err, r.MaxRetryDelay, time.Now())
	log.FromContext(ctx).Info("Reconcile failed; trying again", "error", err.Error(), "after", s.retry.After)
}

// windowsAt reads the pool's maintenance windows at now.
func windowsAt(pool *v1alpha1.MachineConfigPool, now time.Time) windowState {
	if len(pool.Spec.MaintenanceWindows) == 0 {
		return windowState{}
	}
	w := windowState{set: true}
	sched, err := window.Parse(pool.Spec.MaintenanceWindows)
	if err != nil {
		w.err = err
		return w
	}
	w.loc = sched[0].Location
	w.state = sched.At(now)
	return w
}

func planPool(pool *v1alpha1.MachineConfigPool, w windowState, target plan.Target, now time.Time) plan.Pool {
	p := plan.Pool{Name: pool.Name, Paused: pool.Spec.Paused, MaxUnavailable: pool.Spec.MaxUnavailable, MaxFailedNodes: 1,
		OutsideWindow: !w.open(), Now: now}
	if pool.Spec.MaxFailedNodes != nil {
		p.MaxFailedNodes = *pool.Spec.MaxFailedNodes
	}
	p.MaxBlockedNodes = 1
	if pool.Spec.MaxBlockedNodes != nil {
		p.MaxBlockedNodes = int(max(*pool.Spec.MaxBlockedNodes, 0))
	}
	if pool.Spec.StageAhead != nil {
		p.StageAhead = int(max(*pool.Spec.StageAhead, 0))
	}
	p.Steps = planSteps(pool, target)
	if c := pool.Spec.Canary; c != nil {
		p.Canary = &plan.Canary{BySelector: c.NodeSelector != nil, Soak: c.SoakTime.Duration}
		if c.Count != nil {
			p.Canary.Count = int(*c.Count)
		}
		// The soak this controller recorded, if it is of this target:
		// the status is its only memory of when the soak started.
		if st := pool.Status.Canary; st != nil && st.SoakStartedAt != nil &&
			st.TargetConfig == target.Config && st.TargetImage == target.Image {
			p.Canary.SoakStartedAt = st.SoakStartedAt.Time
		}
	}
	if t := pool.Spec.Topology; t != nil {
		p.Topology = &plan.Topology{MaxUnavailable: t.MaxUnavailable, MinAvailable: t.MinAvailable,
			Sequential: t.Order == v1alpha1.TopologySequential, Order: t.Groups}
	}
	return p
}

// poolNodeSet is the pool's nodes, for the planner and by name.
type poolNodeSet struct {
	plan   []plan.Node
	byName map[string]*corev1.Node
}

// poolNodes lists the nodes the pool selects, each with every pool that
// selects it (more than one is a conflict the planner reports). The list
// comes from the cache without copies: nothing here modifies it.
func (r *Reconciler) poolNodes(ctx context.Context, pool *v1alpha1.MachineConfigPool) (poolNodeSet, error) {
	set := poolNodeSet{byName: map[string]*corev1.Node{}}
	sel := nodeSelector(pool)
	if sel == nil {
		return set, nil
	}
	var pools v1alpha1.MachineConfigPoolList
	if err := r.Client.List(ctx, &pools); err != nil {
		return set, fmt.Errorf("list pools: %w", err)
	}
	sels := poolSelectors(pools.Items)
	canary := canarySelector(pool)
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return set, fmt.Errorf("list nodes of pool %s: %w", pool.Name, err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		set.byName[n.Name] = n
		pn := planNode(n, sels.poolsOf(n))
		pn.InCanary = canary != nil && canary.Matches(labels.Set(n.Labels))
		if t := pool.Spec.Topology; t != nil {
			pn.Group = n.Labels[t.Key]
		}
		set.plan = append(set.plan, pn)
	}
	return set, nil
}

// apply writes the planned desired state onto the nodes, with what their
// daemons need to carry it out.
func (r *Reconciler) apply(ctx context.Context, s *scope, nodes map[string]*corev1.Node) error {
	health := DefaultHealthCheckTimeout
	if s.pool.Spec.HealthCheckTimeout != nil {
		health = s.pool.Spec.HealthCheckTimeout.Duration
	}
	var patches patchSet
	for _, a := range s.result.Actions {
		n, ok := nodes[a.Node]
		if !ok {
			continue
		}
		patch := client.MergeFrom(n)
		next := n.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[v1alpha1.DesiredConfigAnnotation] = a.Config
		next.Annotations[v1alpha1.DesiredImageAnnotation] = a.Image
		// Its turn: what it staged ahead, if anything, is its update's.
		delete(next.Annotations, v1alpha1.DesiredStageAnnotation)
		delete(next.Annotations, v1alpha1.DesiredStageConfigAnnotation)
		next.Annotations[v1alpha1.NodePoolAnnotation] = s.pool.Name
		next.Annotations[v1alpha1.HealthCheckTimeoutAnnotation] = health.String()
		if s.target.pullSecret != "" {
			next.Annotations[v1alpha1.ImagePullSecretAnnotation] = s.target.pullSecret
		} else {
			delete(next.Annotations, v1alpha1.ImagePullSecretAnnotation)
		}
		if s.target.signaturePolicy != "" {
			next.Annotations[v1alpha1.ImageSignaturePolicyAnnotation] = s.target.signaturePolicy
		} else {
			delete(next.Annotations, v1alpha1.ImageSignaturePolicyAnnotation)
		}
		patches.add(func() error {
			if err := r.Client.Patch(ctx, next, patch); err != nil {
				return fmt.Errorf("set the desired state of node %s: %w", a.Node, err)
			}
			// An empty image is the node's original one.
			log.FromContext(ctx).Info("Node's desired state changed", "node", a.Node,
				"desiredConfig", a.Config, "desiredImage", a.Image,
				"previousConfig", n.Annotations[v1alpha1.DesiredConfigAnnotation], "previousImage", n.Annotations[v1alpha1.DesiredImageAnnotation])
			r.Recorder.Eventf(s.pool, next, corev1.EventTypeNormal, "NodeUpdateStarted", "Update",
				"Node %s: desired config %s, image %s", a.Node, a.Config, a.Image)
			return nil
		})
	}
	r.applyStage(ctx, s, nodes, &patches)
	return patches.run()
}

// applyStage makes the desiredStage annotations of the pool's nodes what
// the plan says: the image on the nodes of Stage, none on the others
// (the nodes just taken had theirs removed with their desired pair).
// The pull secret goes with it, as the download needs it.
func (r *Reconciler) applyStage(ctx context.Context, s *scope, nodes map[string]*corev1.Node, patches *patchSet) {
	want := make(map[string]string, len(s.result.Stage))
	for _, a := range s.result.Stage {
		want[a.Node] = a.Image
	}
	taken := make(map[string]bool, len(s.result.Actions))
	for _, a := range s.result.Actions {
		taken[a.Node] = true
	}
	for name, n := range nodes {
		image, has := n.Annotations[v1alpha1.DesiredStageAnnotation]
		config := n.Annotations[v1alpha1.DesiredStageConfigAnnotation]
		wantConfig := ""
		if want[name] != "" {
			wantConfig = s.target.Config
		}
		if taken[name] || image == want[name] && config == wantConfig && (has || want[name] == "") {
			continue
		}
		patch := client.MergeFrom(n)
		next := n.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		if want[name] == "" {
			delete(next.Annotations, v1alpha1.DesiredStageAnnotation)
			delete(next.Annotations, v1alpha1.DesiredStageConfigAnnotation)
		} else {
			next.Annotations[v1alpha1.DesiredStageAnnotation] = want[name]
			// The daemon decides the update's disruption once staged.
			next.Annotations[v1alpha1.DesiredStageConfigAnnotation] = wantConfig
			if s.target.pullSecret != "" {
				next.Annotations[v1alpha1.ImagePullSecretAnnotation] = s.target.pullSecret
			}
		}
		patches.add(func() error {
			if err := r.Client.Patch(ctx, next, patch); err != nil {
				return fmt.Errorf("set the desired stage of node %s: %w", name, err)
			}
			log.FromContext(ctx).Info("Node's desired stage changed", "node", name, "desiredStage", want[name], "previous", image)
			return nil
		})
	}
}

// writeStatus writes the pool's status this controller owns when it
// changed.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) error {
	next := s.pool.DeepCopy()
	if s.planned {
		setStatus(next, s)
	} else {
		setRetrying(next, s)
	}
	if equality.Semantic.DeepEqual(next.Status, s.pool.Status) {
		return nil
	}
	if err := poolstatus.Rollout.Apply(ctx, r.Client, s.pool, next); err != nil {
		return err
	}
	for _, t := range []string{v1alpha1.PoolUpdated, v1alpha1.PoolNodeDegraded} {
		old, now := meta.FindStatusCondition(s.pool.Status.Conditions, t), meta.FindStatusCondition(next.Status.Conditions, t)
		if now != nil && (old == nil || old.Status != now.Status || old.Reason != now.Reason) {
			log.FromContext(ctx).Info("Pool condition changed", "type", t, "status", now.Status, "reason", now.Reason, "message", now.Message)
		}
	}
	r.gateEvent(s.pool, meta.FindStatusCondition(s.pool.Status.Conditions, v1alpha1.PoolUpdated),
		meta.FindStatusCondition(next.Status.Conditions, v1alpha1.PoolUpdated))
	return nil
}

// gateEvent tells, once per image, that the approval gate holds the pool:
// a Warning for a rejected image, since someone has to act, and a Normal
// Event for one that waits. The message names the build, so a newer image
// held in turn gets its own Event.
func (r *Reconciler) gateEvent(pool *v1alpha1.MachineConfigPool, old, now *metav1.Condition) {
	if now == nil || (old != nil && old.Reason == now.Reason && old.Message == now.Message) {
		return
	}
	switch now.Reason {
	case v1alpha1.ReasonImageRejected:
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, v1alpha1.ReasonImageRejected, "Gate", "%s", now.Message)
	case v1alpha1.ReasonAwaitingImageApproval:
		r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, v1alpha1.ReasonAwaitingImageApproval, "Gate", "%s", now.Message)
	case v1alpha1.ReasonInvalidMaintenanceWindow:
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalidMaintenanceWindow, "Schedule", "%s", now.Message)
	case v1alpha1.ReasonInvalidGate:
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalidGate, "Gate", "%s", now.Message)
	case v1alpha1.ReasonHeldByGate:
		r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, v1alpha1.ReasonHeldByGate, "Gate", "%s", now.Message)
	}
}
