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
		switch {
		case machineconfig.Rendered(&mc):
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
