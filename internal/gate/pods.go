package gate

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// fromWatchCache has the API server answer a list from its watch cache
// rather than from etcd: the gates are re-checked every 30 s while they
// hold, and need no quorum read.
var fromWatchCache = &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}

// errEmptySelector refuses a podSelector that selects every pod.
var errEmptySelector = errors.New("podSelector is empty and would select every pod of the cluster: give matchLabels or matchExpressions")

// blockingPods finds, for each of nodes, one matching pod that runs on
// it (namespace/name, the first by name), among pods that have not
// finished.
func (e *Evaluator) blockingPods(ctx context.Context, g *v1alpha1.BlockingPodsGate, nodes []string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout())
	defer cancel()
	sel, err := metav1.LabelSelectorAsSelector(&g.PodSelector)
	if err != nil {
		return nil, fmt.Errorf("podSelector: %w", err)
	}
	if sel.Empty() {
		return nil, errEmptySelector
	}
	var namespaces map[string]bool
	if g.NamespaceSelector != nil {
		nsSel, err := metav1.LabelSelectorAsSelector(g.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
		var nsList corev1.NamespaceList
		if err := e.Reader.List(ctx, &nsList, fromWatchCache, client.MatchingLabelsSelector{Selector: nsSel}); err != nil {
			return nil, safeError("cannot list the namespaces", err, apiFailure(ctx, err))
		}
		namespaces = make(map[string]bool, len(nsList.Items))
		for _, ns := range nsList.Items {
			namespaces[ns.Name] = true
		}
	}
	want := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		want[n] = true
	}
	var pods corev1.PodList
	if err := e.Reader.List(ctx, &pods, fromWatchCache, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, safeError("cannot list the pods", err, apiFailure(ctx, err))
	}
	found := map[string]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !want[p.Spec.NodeName] || (namespaces != nil && !namespaces[p.Namespace]) {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		name := p.Namespace + "/" + p.Name
		if cur, ok := found[p.Spec.NodeName]; !ok || name < cur {
			found[p.Spec.NodeName] = name
		}
	}
	return found, nil
}
