package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func TestDrainAndUncordonOnRequest(t *testing.T) {
	f := newFixture(t, "drain", 1, nil)
	logs := startController(t)
	f.annotate("drain-0", v1alpha1.NodePoolAnnotation, "drain", v1alpha1.DesiredDrainAnnotation, "drain-k1")
	eventually(t, "drained", func() error {
		n := f.node("drain-0")
		if !n.Spec.Unschedulable || n.Annotations[v1alpha1.LastAppliedDrainAnnotation] != "drain-k1" {
			return fmt.Errorf("unschedulable %v, lastAppliedDrain %q", n.Spec.Unschedulable, n.Annotations[v1alpha1.LastAppliedDrainAnnotation])
		}
		if s := n.Annotations[v1alpha1.DrainStartedAnnotation]; s != "" {
			return fmt.Errorf("drainStarted %q is left behind", s)
		}
		return nil
	})
	f.annotate("drain-0", v1alpha1.DesiredDrainAnnotation, "uncordon-k1")
	eventually(t, "uncordoned", func() error {
		n := f.node("drain-0")
		if n.Spec.Unschedulable || n.Annotations[v1alpha1.LastAppliedDrainAnnotation] != "uncordon-k1" {
			return fmt.Errorf("unschedulable %v, lastAppliedDrain %q", n.Spec.Unschedulable, n.Annotations[v1alpha1.LastAppliedDrainAnnotation])
		}
		return nil
	})
	for _, l := range []struct{ msg, request string }{
		{"Drain started", "drain-k1"}, {"Drain finished", "drain-k1"}, {"Node uncordoned", "uncordon-k1"},
	} {
		logs.Wait(t, timeout, l.msg, map[string]string{"name": "drain-0", "request": l.request})
	}
}

func TestDrainPastItsTimeoutDegradesTheNodeAndNamesTheBudget(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "pdb", 1, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.DrainTimeout = &metav1.Duration{Duration: 3 * time.Second}
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "drain-"}}
	must(t, env.Client.Create(ctx, ns))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "guarded", Labels: map[string]string{"app": "guarded"}},
		Spec:       corev1.PodSpec{NodeName: "pdb-0", Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/app@sha256:" + digest('1')}}},
	}
	must(t, env.Client.Create(ctx, pod))
	// Evictions ignore budgets for pending pods: make it run, as a kubelet
	// would.
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	must(t, env.Client.Status().Update(ctx, pod))
	one := intstr.FromInt32(1)
	must(t, env.Client.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "keep-one"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}))
	logs := startController(t)
	f.annotate("pdb-0", v1alpha1.NodePoolAnnotation, "pdb", v1alpha1.DesiredDrainAnnotation, "drain-k2")
	eventually(t, "degraded by the drain timeout", func() error {
		n := f.node("pdb-0")
		reason := n.Annotations[v1alpha1.ReasonAnnotation]
		if n.Annotations[v1alpha1.StateAnnotation] != v1alpha1.NodeStateDegraded {
			return fmt.Errorf("state %q", n.Annotations[v1alpha1.StateAnnotation])
		}
		for _, want := range []string{"Drain timed out after 3s", "pod " + ns.Name + "/guarded", "PodDisruptionBudget " + ns.Name + "/keep-one"} {
			if !strings.Contains(reason, want) {
				return fmt.Errorf("reason %q does not say %q", reason, want)
			}
		}
		return nil
	})
	n := f.node("pdb-0")
	if !n.Spec.Unschedulable {
		t.Error("a node whose drain timed out was uncordoned; it must stay cordoned for a person")
	}
	if got := n.Annotations[v1alpha1.LastAppliedDrainAnnotation]; got == "drain-k2" {
		t.Error("a drain that timed out was acknowledged as done")
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || pod.DeletionTimestamp != nil {
		t.Errorf("the guarded pod was evicted despite its budget: %v", err)
	}
	logs.Wait(t, timeout, "Drain blocked; trying again", map[string]string{"name": "pdb-0", "request": "drain-k2", "level": "1"})
	timedOut := logs.Wait(t, timeout, "Drain timed out; the node is left cordoned and Degraded", map[string]string{"name": "pdb-0", "request": "drain-k2", "drainTimeout": "3s"})
	if b, _ := timedOut["blockers"].(string); !strings.Contains(b, "PodDisruptionBudget "+ns.Name+"/keep-one") {
		t.Errorf("the timeout's log names blockers %q, want the budget", b)
	}
}
