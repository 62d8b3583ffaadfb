package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubectl/pkg/drain"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/status"
)

// DefaultDrainAttempt bounds one drain attempt. A drain blocked by a
// PodDisruptionBudget is tried again until the pool's drainTimeout has
// passed, so that a worker is never held for the whole timeout and the
// attempt's error can be read.
const DefaultDrainAttempt = 10 * time.Second

// DrainReconciler carries out the drain and uncordon requests of the node
// daemons (desiredDrain), and acknowledges each in lastAppliedDrain, or,
// for a drain it gives up on, records its verdict in drainFailure. It
// never writes the node's state or reason: the daemon reports the
// verdict as Degraded.
type DrainReconciler struct {
	Client client.Client
	// Kube is what the drain library evicts and lists pods with.
	Kube     kubernetes.Interface
	Recorder events.EventRecorder
	// Attempt bounds one drain attempt; zero means DefaultDrainAttempt.
	Attempt time.Duration
	// QuarantineRetry is how often the drain of a quarantined node is
	// tried again; zero means DefaultQuarantineRetry.
	QuarantineRetry time.Duration
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools,verbs=get;list;watch

// drainWorkers is how many drains and uncordons run at once. A drain's
// worker mostly waits for pods to go; with fewer workers than a wave's
// nodes (maxUnavailable), the last of the wave waited for another's
// drain to end before its own began.
const drainWorkers = 16

// SetupWithManager registers the reconciler for nodes with a request not
// yet carried out. Several nodes may drain at once (maxUnavailable).
func (r *DrainReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Kube == nil {
		cfg := rest.CopyConfig(mgr.GetConfig())
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return refusedAtOnce{rt} })
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("drain client: %w", err)
		}
		r.Kube = kube
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("drain").
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return pending(o) || staleCordon(o)
		}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: drainWorkers}).
		Complete(r)
}

func drainRequest(o client.Object) (req, done string) {
	a := o.GetAnnotations()
	return a[v1alpha1.DesiredDrainAnnotation], a[v1alpha1.LastAppliedDrainAnnotation]
}

// pending is a request not yet carried out.
func pending(o client.Object) bool {
	req, done := drainRequest(o)
	return req != "" && req != done
}

// staleCordon is a record of Strata's cordon on a node that is
// schedulable with no drain under way: someone uncordoned it. The record
// must go, or a later cordon by a person would pass for Strata's.
func staleCordon(o client.Object) bool {
	n, ok := o.(*corev1.Node)
	if !ok || n.Spec.Unschedulable || n.Annotations[v1alpha1.CordonedForAnnotation] == "" {
		return false
	}
	req, _ := drainRequest(o)
	return !pending(o) || strings.HasPrefix(req, v1alpha1.UncordonRequestPrefix)
}

// mayUncordon says whether an uncordon request for update key may be
// carried out: only on a node Strata cordoned (its cordonedFor record),
// and only for the update it cordoned the node for or the node's current
// one (a newer update that replaced it asks with its own key). A node
// cordoned by someone else, a person's quarantine, has no record, and no
// daemon can write one (config/policy).
func mayUncordon(node *corev1.Node, key string) bool {
	record := node.Annotations[v1alpha1.CordonedForAnnotation]
	current := v1alpha1.UpdateKey(node.Annotations[v1alpha1.DesiredImageAnnotation], node.Annotations[v1alpha1.DesiredConfigAnnotation])
	return record != "" && (key == record || key == current)
}

// Reconcile carries out the node's request, or waits for a blocked drain,
// or gives up on it past the pool's drainTimeout.
func (r *DrainReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cached := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, cached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if staleCordon(cached) {
		// The cache may lag the controller's own uncordon, which
		// forgets the record in a second write: read the node itself
		// before taking the cordon's end for someone else's.
		live, err := r.Kube.CoreV1().Nodes().Get(ctx, req.Name, metav1.GetOptions{})
		if err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if !staleCordon(live) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.forgetCordon(ctx, live)
	}
	if !pending(cached) {
		return ctrl.Result{}, nil
	}
	// The drain library patches from the whole object; the cache holds a
	// stripped one.
	node, err := r.Kube.CoreV1().Nodes().Get(ctx, req.Name, metav1.GetOptions{})
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The cache may lag this controller's own acknowledgement: the
	// daemon's next write, seen before it, asked for the same drain
	// again, which ran twice (a second cordon, pod listing and
	// acknowledgement on a node about to reboot).
	if !pending(node) {
		return ctrl.Result{}, nil
	}
	want, _ := drainRequest(node)
	helper := r.helper(ctx)
	logger := log.FromContext(ctx).WithValues("request", want)
	switch {
	case strings.HasPrefix(want, v1alpha1.UncordonRequestPrefix):
		if !mayUncordon(node, strings.TrimPrefix(want, v1alpha1.UncordonRequestPrefix)) {
			// Acknowledged all the same: the daemon's update is over,
			// and the cordon is whoever set it's to lift.
			if node.Spec.Unschedulable {
				r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, "LeftCordoned", "Uncordon",
					"Node %s stays cordoned after its update: Strata did not cordon it for this update (someone else did); uncordon it when done", node.Name)
				logger.Info("Leaving the node cordoned: Strata did not cordon it for this update",
					"cordonedFor", node.Annotations[v1alpha1.CordonedForAnnotation])
			}
			return ctrl.Result{}, r.acknowledge(ctx, node, want, nil, false)
		}
		if err := drain.RunCordonOrUncordon(helper, node, false); err != nil {
			return ctrl.Result{}, fmt.Errorf("uncordon node %s: %w", node.Name, err)
		}
		r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, "Uncordoned", "Uncordon", "Node %s is schedulable again after its update", node.Name)
		if err := r.acknowledge(ctx, node, want, nil, true); err != nil {
			return ctrl.Result{}, err
		}
		logger.Info("Node uncordoned")
		return ctrl.Result{}, nil
	case !strings.HasPrefix(want, v1alpha1.DrainRequestPrefix):
		// Not a request this version understands; the daemon writes it.
		logger.V(1).Info("Ignoring a drain request this version does not understand")
		return ctrl.Result{}, nil
	case drainVerdict(node, want) != "":
		// A drain that timed out: the node is left cordoned for a person.
		logger.V(1).Info("Not draining a node whose drain failed; it is left cordoned for a person",
			"verdict", drainVerdict(node, want))
		return ctrl.Result{}, nil
	}

	started, err := r.startDrain(ctx, node, strings.TrimPrefix(want, v1alpha1.DrainRequestPrefix))
	if err != nil {
		return ctrl.Result{}, err
	}
	drainErr := evictPods(ctx, helper, node.Name)
	if drainErr == nil {
		r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, "Drained", "Drain", "Node %s is drained for its update", node.Name)
		if err := r.acknowledge(ctx, node, want, nil, false); err != nil {
			return ctrl.Result{}, err
		}
		logger.Info("Drain finished", "elapsed", time.Since(started).Round(time.Millisecond).String())
		return ctrl.Result{}, nil
	}
	pool, err := r.poolOf(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	timeout := drainTimeoutOf(pool)
	if time.Since(started) < timeout {
		// Blocked by a budget or pods still terminating: try again.
		logger.V(1).Info("Drain blocked; trying again", "elapsed", time.Since(started).Round(time.Second).String(),
			"drainTimeout", timeout.String(), "error", drainErr.Error())
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	why := r.blockers(ctx, node.Name)
	if why == "" {
		why = drainErr.Error()
	}
	if pool != nil && pool.Spec.UndrainableNodeBehavior == v1alpha1.UndrainableQuarantine {
		return ctrl.Result{RequeueAfter: r.quarantineRetry()}, r.quarantine(ctx, node, want, timeout, why)
	}
	reason := fmt.Sprintf("Drain timed out after %s (drainTimeout); the node is left cordoned: %s", timeout, why)
	r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, "DrainFailed", "Drain", "%s", reason)
	if err := r.acknowledge(ctx, node, want, &reason, false); err != nil {
		return ctrl.Result{}, err
	}
	logger.Info("Drain timed out; the node is left cordoned and Degraded", "drainTimeout", timeout.String(), "blockers", why)
	return ctrl.Result{}, nil
}

// drainVerdict names the annotation that says drain request want was
// given up on and waits for a person ("" when none does): drainFailure
// naming it (this controller's verdict), or the state, Degraded with the
// drain still asked for. The daemon reports that only for a drain given
// up on: this controller's verdict, which it mirrors; an older
// controller's, written as the state itself, with no drainFailure; or,
// once a person removed drainFailure to have the drain tried again, until
// the daemon reports Working, whose write brings the node back here to be
// drained.
func drainVerdict(node *corev1.Node, want string) string {
	if request, _, ok := v1alpha1.ParseDrainFailure(node.Annotations[v1alpha1.DrainFailureAnnotation]); ok && request == want {
		return v1alpha1.DrainFailureAnnotation
	}
	if node.Annotations[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDegraded {
		return v1alpha1.StateAnnotation
	}
	return ""
}

// refusedAtOnce drops Retry-After from 429 answers (an eviction a budget
// refuses), so that client-go returns them at once instead of sleeping and
// retrying inside one call past the drain library's timeout. The library
// then waits and retries between calls, and never has to cancel an eviction
// in flight: a cancelled one can be recorded in the budget's disruptedPods
// without the pod being deleted, which blocks every eviction under that
// budget for the disruption controller's two-minute deletion timeout.
type refusedAtOnce struct{ next http.RoundTripper }

func (t refusedAtOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		resp.Header.Del("Retry-After")
	}
	return resp, err
}

func (r *DrainReconciler) attempt() time.Duration {
	if r.Attempt == 0 {
		return DefaultDrainAttempt
	}
	return r.Attempt
}

// helper is the drain library set up for one attempt. Its calls are not
// cancelled when the controller shuts down: an eviction cut off in flight
// can be recorded in the budget's disruptedPods without the pod being
// deleted (see refusedAtOnce), and the attempt's Timeout bounds it anyway,
// well within the manager's graceful shutdown.
func (r *DrainReconciler) helper(ctx context.Context) *drain.Helper {
	return &drain.Helper{
		Ctx:                 context.WithoutCancel(ctx),
		Client:              r.Kube,
		Force:               true, // pods without a controller are deleted, as MCO does
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  true,
		GracePeriodSeconds:  -1,
		Timeout:             r.attempt(),
		Out:                 io.Discard,
		ErrOut:              io.Discard,
	}
}

// startDrain records when the drain of the current request began (once,
// so that retries and a restarted controller count from there), claims the cordon for update
// key, and cordons the node, in one patch: the record of Strata's cordon
// comes with the cordon, so no crash leaves one without the other, and
// a drain costs one write before its evictions, not three. The same
// patch removes the verdict on an earlier request (drainFailure), which
// the daemon ignores already, so that no stale one is left to read (a
// quarantine of an earlier request goes when the next one is carried out). A node
// already cordoned without a record was cordoned by someone else: it is
// drained but not claimed, and stays cordoned after the update. A record
// from an earlier update of Strata's own cordon moves to this one.
func (r *DrainReconciler) startDrain(ctx context.Context, node *corev1.Node, key string) (time.Time, error) {
	annotations := map[string]any{}
	started, err := time.Parse(time.RFC3339, node.Annotations[v1alpha1.DrainStartedAnnotation])
	if err != nil {
		// Full precision: a start cut to the second would end the drain
		// timeout up to a second early.
		started = time.Now().UTC()
		annotations[v1alpha1.DrainStartedAnnotation] = started.Format(time.RFC3339Nano)
		log.FromContext(ctx).Info("Drain started", "request", node.Annotations[v1alpha1.DesiredDrainAnnotation])
	}
	switch record := node.Annotations[v1alpha1.CordonedForAnnotation]; {
	case record == key:
	case node.Spec.Unschedulable && record == "":
		log.FromContext(ctx).Info("The node is cordoned by someone else: draining it, and leaving it cordoned after the update")
	default:
		annotations[v1alpha1.CordonedForAnnotation] = key
	}
	if _, ok := node.Annotations[v1alpha1.DrainFailureAnnotation]; ok {
		annotations[v1alpha1.DrainFailureAnnotation] = nil
	}
	patch := map[string]any{}
	if len(annotations) > 0 {
		patch["metadata"] = map[string]any{"annotations": annotations}
	}
	if !node.Spec.Unschedulable {
		patch["spec"] = map[string]any{"unschedulable": true}
	}
	if len(patch) == 0 {
		return started, nil
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return started, err
	}
	if _, err := r.Kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, raw, metav1.PatchOptions{}); err != nil {
		return started, fmt.Errorf("start the drain of node %s (record, cordon): %w", node.Name, err)
	}
	return started, nil
}

// forgetCordon removes a stale record of Strata's cordon (staleCordon).
func (r *DrainReconciler) forgetCordon(ctx context.Context, node *corev1.Node) error {
	raw, err := jsonPatch(map[string]any{v1alpha1.CordonedForAnnotation: nil})
	if err != nil {
		return err
	}
	if _, err := r.Kube.CoreV1().Nodes().Patch(ctx, node.Name, "application/merge-patch+json", raw, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("forget the cordon of node %s: %w", node.Name, err)
	}
	log.FromContext(ctx).Info("Someone uncordoned the node: Strata no longer counts the cordon as its own")
	return nil
}

// acknowledge records the outcome of request: lastAppliedDrain when it
// was carried out, or drainFailure naming it with the reason when the
// drain gave up (the daemon reports the node Degraded with it; this
// controller writes no state or reason); uncordoned forgets the record of
// Strata's cordon. A verdict on an earlier request goes: it is no longer
// the node's latest. Either way the drain start is forgotten, so that a
// person who removes drainFailure gets a whole new drainTimeout.
func (r *DrainReconciler) acknowledge(ctx context.Context, node *corev1.Node, request string, failure *string, uncordoned bool) error {
	ann := map[string]any{v1alpha1.DrainStartedAnnotation: nil, v1alpha1.DrainFailureAnnotation: nil, v1alpha1.DrainBlockedAnnotation: nil}
	if failure == nil {
		ann[v1alpha1.LastAppliedDrainAnnotation] = request
	} else {
		ann[v1alpha1.DrainFailureAnnotation] = v1alpha1.DrainFailure(request, status.Truncate(*failure, 4096))
	}
	if uncordoned {
		ann[v1alpha1.CordonedForAnnotation] = nil
	}
	meta := map[string]any{"annotations": ann}
	if _, ok := node.Labels[v1alpha1.DrainBlockedLabel]; ok {
		// The quarantine ends with the request it was for.
		meta["labels"] = map[string]any{v1alpha1.DrainBlockedLabel: nil}
	}
	raw, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	if _, err := r.Kube.CoreV1().Nodes().Patch(ctx, node.Name, "application/merge-patch+json", raw, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("acknowledge the drain request of node %s: %w", node.Name, err)
	}
	return nil
}

// poolOf is the node's pool (the pool annotation the rollout controller
// writes); nil when it has none or the pool is gone.
func (r *DrainReconciler) poolOf(ctx context.Context, node *corev1.Node) (*v1alpha1.MachineConfigPool, error) {
	name := node.Annotations[v1alpha1.NodePoolAnnotation]
	if name == "" {
		return nil, nil
	}
	pool := &v1alpha1.MachineConfigPool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get pool %s of node %s: %w", name, node.Name, err)
	}
	return pool, nil
}

// drainTimeoutOf is pool's drainTimeout (nil: the default).
func drainTimeoutOf(pool *v1alpha1.MachineConfigPool) time.Duration {
	if pool != nil && pool.Spec.DrainTimeout != nil {
		return pool.Spec.DrainTimeout.Duration
	}
	return DefaultDrainTimeout
}

// DefaultQuarantineRetry is how often the drain of a quarantined node is
// tried again: often enough that a budget that allows again is used
// within the minute, seldom enough that a blocked node costs few API
// calls.
const DefaultQuarantineRetry = 30 * time.Second

func (r *DrainReconciler) quarantineRetry() time.Duration {
	if r.QuarantineRetry > 0 {
		return r.QuarantineRetry
	}
	return DefaultQuarantineRetry
}

// quarantine records that drain request is past its timeout and keeps
// being tried (undrainableNodeBehavior Quarantine): the drainBlocked
// annotation with what blocks it, and the drain-blocked label. The node
// stays cordoned, its daemon waits, and the rollout goes on with other
// nodes. Written, with an Event, only when it changes.
func (r *DrainReconciler) quarantine(ctx context.Context, node *corev1.Node, request string, timeout time.Duration, why string) error {
	reason := status.Truncate(fmt.Sprintf("Drain blocked past drainTimeout %s; the node is quarantined and the drain tried every %s: %s",
		timeout, r.quarantineRetry(), why), 4096)
	value := v1alpha1.DrainFailure(request, reason)
	if node.Annotations[v1alpha1.DrainBlockedAnnotation] == value && node.Labels[v1alpha1.DrainBlockedLabel] == "true" {
		return nil
	}
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{v1alpha1.DrainBlockedAnnotation: value},
		"labels":      map[string]any{v1alpha1.DrainBlockedLabel: "true"},
	}})
	if err != nil {
		return err
	}
	if _, err := r.Kube.CoreV1().Nodes().Patch(ctx, node.Name, "application/merge-patch+json", raw, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("quarantine node %s: %w", node.Name, err)
	}
	r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, "DrainBlocked", "Drain", "%s", reason)
	log.FromContext(ctx).Info("Drain blocked past its timeout; the node is quarantined and the drain tried again",
		"drainTimeout", timeout.String(), "blockers", why)
	return nil
}

// blockers says which pods are still on the node and, for each, the
// budget that protects it: what a person must look at.
func (r *DrainReconciler) blockers(ctx context.Context, node string) string {
	pods, err := r.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return ""
	}
	budgets := map[string][]policyv1.PodDisruptionBudget{}
	var out []string
	for _, p := range pods.Items {
		if isDaemonSetPod(&p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, ok := budgets[p.Namespace]; !ok {
			list, err := r.Kube.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
			if err == nil {
				budgets[p.Namespace] = list.Items
			}
		}
		desc := "pod " + p.Namespace + "/" + p.Name
		if p.DeletionTimestamp != nil {
			desc += " is still terminating"
		}
		for _, b := range budgets[p.Namespace] {
			if selects(&b, &p) {
				desc += fmt.Sprintf(" is protected by PodDisruptionBudget %s/%s (%d disruptions allowed)", b.Namespace, b.Name, b.Status.DisruptionsAllowed)
			}
		}
		out = append(out, desc)
	}
	return strings.Join(out, "; ")
}
