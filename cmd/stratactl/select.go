package main

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// roleSelector is the selector of a pool whose MachineConfigPool is not in
// the input: the MachineConfigs labelled with the pool's name as their
// role, as a pool is usually set up.
func roleSelector(pool string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.RoleLabel: pool}}
}

// selectMachineConfigs splits all into the MachineConfigs a pool with
// selector selects, in name order, and the others. It selects as the
// render controller does (controllers/render selectSources): a nil
// selector selects none, an empty one all; rendered MachineConfigs and
// ones being deleted are never selected.
func selectMachineConfigs(selector *metav1.LabelSelector, all []v1alpha1.MachineConfig) (selected, others []v1alpha1.MachineConfig, err error) {
	sel := labels.Nothing()
	if selector != nil {
		if sel, err = metav1.LabelSelectorAsSelector(selector); err != nil {
			return nil, nil, err
		}
	}
	for _, mc := range all {
		_, rendered := mc.Annotations[v1alpha1.GeneratedByControllerAnnotation]
		if !rendered && mc.DeletionTimestamp.IsZero() && sel.Matches(labels.Set(mc.Labels)) {
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

// describeSelector says what a selector selects, for messages.
func describeSelector(selector *metav1.LabelSelector) string {
	switch {
	case selector == nil:
		return "none (no machineConfigSelector)"
	case len(selector.MatchLabels) == 0 && len(selector.MatchExpressions) == 0:
		return "all (an empty machineConfigSelector)"
	}
	return metav1.FormatLabelSelector(selector)
}

// describeUnselected names MachineConfigs a pool does not select and why,
// at most limit of them (0: all).
func describeUnselected(mcs []v1alpha1.MachineConfig, limit int) string {
	var parts []string
	for i, mc := range mcs {
		if limit > 0 && i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(mcs)-limit))
			break
		}
		why := "metadata.labels: none"
		_, rendered := mc.Annotations[v1alpha1.GeneratedByControllerAnnotation]
		switch {
		case rendered:
			why = "rendered by the controller"
		case !mc.DeletionTimestamp.IsZero():
			why = "being deleted"
		case len(mc.Labels) > 0:
			why = "metadata.labels: " + labels.Set(mc.Labels).String()
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", mc.Name, why))
	}
	return strings.Join(parts, ", ")
}
