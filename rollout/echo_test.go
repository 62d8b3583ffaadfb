package rollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func TestOwnWritesEcho(t *testing.T) {
	node := func(rv string, ann map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv, Annotations: ann}}
	}
	base := map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.DesiredImageAnnotation: "a"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	var w ownWrites
	w.wrote(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateWorking, v1alpha1.ReasonAnnotation: ""})

	cases := []struct {
		name   string
		before *corev1.Node
		after  *corev1.Node
		echo   bool
	}{
		{"the daemon's own patch", node("1", base), node("2", with(v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking, v1alpha1.ReasonAnnotation, "")), true},
		{"one of its own values", node("1", base), node("2", with(v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking)), true},
		{"the controller's annotation", node("1", base), node("2", with(v1alpha1.DesiredImageAnnotation, "b")), false},
		{"its own key, another's value (the drain controller's Degraded)", node("1", base),
			node("2", with(v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded)), false},
		{"its own patch and a cordon in one event", node("1", base), func() *corev1.Node {
			n := node("2", with(v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking))
			n.Spec.Unschedulable = true
			return n
		}(), false},
		{"an annotation removed", node("1", with("x", "y")), node("2", base), false},
		{"nothing changed (a resync)", node("1", base), node("1", base), false},
		{"a status change only", node("1", base), func() *corev1.Node {
			n := node("2", base)
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
			return n
		}(), false},
		{"no old object", nil, node("2", base), false},
	}
	for _, c := range cases {
		if got := w.echo(c.before, c.after); got != c.echo {
			t.Errorf("%s: echo = %v, want %v", c.name, got, c.echo)
		}
	}
}
