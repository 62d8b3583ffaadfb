package gate

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

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
	var namespaces map[string]bool
	if g.NamespaceSelector != nil {
		nsSel, err := metav1.LabelSelectorAsSelector(g.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
		var nsList corev1.NamespaceList
		if err := e.Reader.List(ctx, &nsList, client.MatchingLabelsSelector{Selector: nsSel}); err != nil {
			return nil, fmt.Errorf("cannot list the namespaces: %w", err)
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
	if err := e.Reader.List(ctx, &pods, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("cannot list the pods: %w", err)
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
