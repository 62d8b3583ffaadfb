package node

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node/plan"
)

// poolIndex indexes Nodes by the pool that took them (NodePoolAnnotation),
// so that a pool finds the nodes it already wrote to without a scan.
const poolIndex = "strata.pool"

// CacheByObject is the rollout controller's cache configuration: Nodes are
// kept stripped to what the rollout reads. Merge it into the manager's
// cache options.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Node{}: {Transform: stripNode},
	}
}

// stripNode keeps a Node's metadata (without managed fields), whether it
// is schedulable, and its Ready condition with no timestamps. Everything
// else (images, addresses, capacity, heartbeat times) is dropped before it
// is cached, so the cache stays small and heartbeats look like no change.
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{TypeMeta: n.TypeMeta, ObjectMeta: n.ObjectMeta}
	out.ManagedFields = nil
	out.Spec.Unschedulable = n.Spec.Unschedulable
	out.Spec.Taints = n.Spec.Taints
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
		}
	}
	return out, nil
}

func indexNodeByPool(obj client.Object) []string {
	if p := obj.GetAnnotations()[v1alpha1.NodePoolAnnotation]; p != "" {
		return []string{p}
	}
	return nil
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// selectors are the pools' node selectors, parsed once per reconcile.
type selectors map[string]labels.Selector

func poolSelectors(pools []v1alpha1.MachineConfigPool) selectors {
	s := selectors{}
	for i := range pools {
		if sel := nodeSelector(&pools[i]); sel != nil {
			s[pools[i].Name] = sel
		}
	}
	return s
}

// nodeSelector is the pool's node selector; nil selects nothing (an
// invalid selector too: the API validates it, so it cannot happen).
func nodeSelector(pool *v1alpha1.MachineConfigPool) labels.Selector {
	if pool.Spec.NodeSelector == nil || pool.DeletionTimestamp != nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pool.Spec.NodeSelector)
	if err != nil {
		return nil
	}
	return sel
}

// canarySelector is the pool's canary selector; nil when its canary is
// by count or it has none (an invalid selector too: the API validates
// it).
func canarySelector(pool *v1alpha1.MachineConfigPool) labels.Selector {
	c := pool.Spec.Canary
	if c == nil || c.NodeSelector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(c.NodeSelector)
	if err != nil {
		return nil
	}
	return sel
}

// poolsOf names every pool selecting the node, sorted.
func (s selectors) poolsOf(n *corev1.Node) []string {
	var out []string
	set := labels.Set(n.Labels)
	for name, sel := range s {
		if sel.Matches(set) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// planNode is the planner's view of a node: its readiness and the
// protocol's annotations.
func planNode(n *corev1.Node, pools []string) plan.Node {
	a := n.Annotations
	// Quarantined for the drain it asks for now: a record of an earlier
	// request is stale.
	request, blockedBy, blocked := v1alpha1.ParseDrainFailure(a[v1alpha1.DrainBlockedAnnotation])
	blocked = blocked && request == a[v1alpha1.DesiredDrainAnnotation] && request != a[v1alpha1.LastAppliedDrainAnnotation]
	if !blocked {
		blockedBy = ""
	}
	return plan.Node{
		Name:          n.Name,
		Ready:         isReady(n),
		Cordoned:      n.Spec.Unschedulable,
		Pools:         pools,
		CurrentConfig: a[v1alpha1.CurrentConfigAnnotation],
		CurrentImage:  a[v1alpha1.CurrentImageAnnotation],
		DesiredConfig: a[v1alpha1.DesiredConfigAnnotation],
		DesiredImage:  a[v1alpha1.DesiredImageAnnotation],
		OriginalImage: a[v1alpha1.OriginalImageAnnotation],
		State:         a[v1alpha1.StateAnnotation],
		Reason:        a[v1alpha1.ReasonAnnotation],
		DesiredStage:  a[v1alpha1.DesiredStageAnnotation],
		StagedImage:   a[v1alpha1.StagedImageAnnotation],
		StagedLive:    a[v1alpha1.StagedLiveAnnotation],
		Hold:          a[v1alpha1.HoldAnnotation],

		DrainBlocked:       blocked,
		DrainBlockedReason: blockedBy,
	}
}
