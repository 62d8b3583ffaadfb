package main

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/machineconfig"
)

// roleSelector is the selector of a pool whose MachineConfigPool is not in
// the input: the MachineConfigs labelled with the pool's name as their
// role, as a pool is usually set up.
func roleSelector(pool string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.RoleLabel: pool}}
}

// describeSelector says what a selector selects, for messages; with
// openShiftRole, naming the role label as OpenShift's, as the input wrote
// it.
func describeSelector(selector *metav1.LabelSelector, openShiftRole bool) string {
	switch {
	case selector == nil:
		return "none (no machineConfigSelector)"
	case len(selector.MatchLabels) == 0 && len(selector.MatchExpressions) == 0:
		return "all (an empty machineConfigSelector)"
	}
	if openShiftRole {
		selector = selector.DeepCopy()
		if v, ok := selector.MatchLabels[v1alpha1.RoleLabel]; ok {
			delete(selector.MatchLabels, v1alpha1.RoleLabel)
			selector.MatchLabels[openShiftRoleLabel] = v
		}
		for i := range selector.MatchExpressions {
			if selector.MatchExpressions[i].Key == v1alpha1.RoleLabel {
				selector.MatchExpressions[i].Key = openShiftRoleLabel
			}
		}
	}
	return metav1.FormatLabelSelector(selector)
}

// labelsAsWritten are a MachineConfig's labels as the input wrote them:
// OpenShift's role label where it was read as Strata's.
func labelsAsWritten(mc *v1alpha1.MachineConfig, openShiftRole bool) labels.Set {
	if !openShiftRole {
		return mc.Labels
	}
	out := labels.Set{}
	for k, v := range mc.Labels {
		if k == v1alpha1.RoleLabel {
			k = openShiftRoleLabel
		}
		out[k] = v
	}
	return out
}

// describeUnselected names MachineConfigs a pool does not select and why,
// at most limit of them (0: all); openShiftRole names the MachineConfigs
// whose role label is OpenShift's in the input.
func describeUnselected(mcs []v1alpha1.MachineConfig, limit int, openShiftRole map[string]bool) string {
	var parts []string
	for i, mc := range mcs {
		if limit > 0 && i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(mcs)-limit))
			break
		}
		why := "metadata.labels: none"
		switch {
		case machineconfig.Rendered(&mc):
			why = "rendered by the controller"
		case !mc.DeletionTimestamp.IsZero():
			why = "being deleted"
		case len(mc.Labels) > 0:
			why = "metadata.labels: " + labelsAsWritten(&mc, openShiftRole[mc.Name]).String()
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", mc.Name, why))
	}
	return strings.Join(parts, ", ")
}
