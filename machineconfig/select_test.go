package machineconfig

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Select is the one selection rule of the render controller and
// stratactl render.
func TestSelect(t *testing.T) {
	now := metav1.Now()
	mc := func(name, role string, mutate ...func(*v1alpha1.MachineConfig)) v1alpha1.MachineConfig {
		m := v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if role != "" {
			m.Labels = map[string]string{v1alpha1.RoleLabel: role}
		}
		for _, f := range mutate {
			f(&m)
		}
		return m
	}
	all := []v1alpha1.MachineConfig{
		mc("50-worker", "worker"),
		mc("10-worker", "worker"),
		mc("20-infra", "infra"),
		mc("30-none", ""),
		mc("rendered-worker-1", "worker", func(m *v1alpha1.MachineConfig) {
			m.Annotations = map[string]string{v1alpha1.GeneratedByControllerAnnotation: "v1"}
		}),
		mc("40-deleted", "worker", func(m *v1alpha1.MachineConfig) { m.DeletionTimestamp = &now }),
	}
	for _, tc := range []struct {
		name     string
		selector *metav1.LabelSelector
		want     []string
	}{
		{"nil selects none", nil, nil},
		{"empty selects all sources", &metav1.LabelSelector{}, []string{"10-worker", "20-infra", "30-none", "50-worker"}},
		{"role label, in name order", &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.RoleLabel: "worker"}}, []string{"10-worker", "50-worker"}},
		{"expression", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: v1alpha1.RoleLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"worker", "infra"}},
		}}, []string{"10-worker", "20-infra", "50-worker"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			selected, others, err := Select(tc.selector, all)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range selected {
				got = append(got, m.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("selected %v, want %v", got, tc.want)
			}
			if len(selected)+len(others) != len(all) {
				t.Errorf("%d selected and %d others of %d", len(selected), len(others), len(all))
			}
		})
	}
	if _, _, err := Select(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Near"}}}, all); err == nil {
		t.Error("a bad operator was accepted")
	}
}
