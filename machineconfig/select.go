package machineconfig

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Rendered tells a rendered MachineConfig (made by the render controller)
// from one a person wrote.
func Rendered(mc metav1.Object) bool {
	_, ok := mc.GetAnnotations()[v1alpha1.GeneratedByControllerAnnotation]
	return ok
}

// Select splits all into the MachineConfigs a pool with selector merges,
// in name order, and the others: a nil selector selects none, an empty one
// all, and rendered MachineConfigs and ones being deleted are never
// selected. The render controller and stratactl render both select with
// it, so that a render on a laptop merges what the cluster would.
func Select(selector *metav1.LabelSelector, all []v1alpha1.MachineConfig) (selected, others []v1alpha1.MachineConfig, err error) {
	sel := labels.Nothing()
	if selector != nil {
		if sel, err = metav1.LabelSelectorAsSelector(selector); err != nil {
			return nil, nil, err
		}
	}
	for _, mc := range all {
		if !Rendered(&mc) && mc.DeletionTimestamp.IsZero() && sel.Matches(labels.Set(mc.Labels)) {
			selected = append(selected, mc)
		} else {
			others = append(others, mc)
		}
	}
	byName := func(a, b v1alpha1.MachineConfig) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(selected, byName)
	slices.SortFunc(others, byName)
	return selected, others, nil
}
