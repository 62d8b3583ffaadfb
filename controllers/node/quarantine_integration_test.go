package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/test/testenv"
)

// With undrainableNodeBehavior Quarantine, a drain that a budget blocks
// past drainTimeout does not fail the node: it is labelled and reported
// with the budget that blocks it, the rollout takes the next node
// (maxUnavailable 1 notwithstanding), and the drain is tried again and
// carried out once the budget allows, which ends the quarantine.
func TestBlockedDrainIsQuarantinedAndThePoolGoesOn(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "quar", 3, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.DrainTimeout = &metav1.Duration{Duration: 3 * time.Second}
		p.Spec.UndrainableNodeBehavior = v1alpha1.UndrainableQuarantine
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "quar-"}}
	must(t, env.Client.Create(ctx, ns))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "db-0", Labels: map[string]string{"app": "db"}},
		Spec:       corev1.PodSpec{NodeName: "quar-0", Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/db@sha256:" + digest('1')}}},
	}
	must(t, env.Client.Create(ctx, pod))
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	must(t, env.Client.Status().Update(ctx, pod))
	one := intstr.FromInt32(1)
	must(t, env.Client.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}))

	cfg := "rendered-quar-1"
	f.layer(cfg, image('e'))
	logs := testenv.NewLogs(1)
	env.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: CacheByObject()}, Logger: logs.Logger()}, func(mgr ctrl.Manager) error {
		if err := (&Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-rollout")}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&DrainReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-drain"),
			Attempt: time.Second, QuarantineRetry: time.Second}).SetupWithManager(mgr)
	})

	if got := f.waitTaken(cfg, image('e'), 1); got[0] != "quar-0" {
		t.Fatalf("first taken %v, want quar-0", got)
	}
	// quar-0's daemon asks for the drain of its update.
	request := v1alpha1.DrainRequestPrefix + v1alpha1.UpdateKey(image('e'), cfg)
	f.annotate("quar-0", v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking, v1alpha1.DesiredDrainAnnotation, request)

	eventually(t, "quar-0 quarantined, naming the budget", func() error {
		n := f.node("quar-0")
		req, why, ok := v1alpha1.ParseDrainFailure(n.Annotations[v1alpha1.DrainBlockedAnnotation])
		if !ok || req != request || !strings.Contains(why, "PodDisruptionBudget "+ns.Name+"/db") {
			return fmt.Errorf("drainBlocked %q", n.Annotations[v1alpha1.DrainBlockedAnnotation])
		}
		if n.Labels[v1alpha1.DrainBlockedLabel] != "true" || !n.Spec.Unschedulable {
			return fmt.Errorf("labels %v, unschedulable %v", n.Labels, n.Spec.Unschedulable)
		}
		return nil
	})
	if n := f.node("quar-0"); n.Annotations[v1alpha1.DrainFailureAnnotation] != "" {
		t.Fatalf("a quarantined drain was given up on: drainFailure %q", n.Annotations[v1alpha1.DrainFailureAnnotation])
	}
	// The rollout goes on beside it, though maxUnavailable is 1.
	f.waitTaken(cfg, image('e'), 2)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut, "quarantined, drain blocked")
	quarantined := func() float64 {
		return testutil.ToFloat64(metrics.PoolSkippedNodes.WithLabelValues("quar", metrics.SkippedQuarantined))
	}
	waitMetric(t, `strata_pool_skipped_nodes{reason="quarantined"}`, quarantined, 1)

	// The budget allows again: the drain is carried out, the quarantine ends.
	must(t, env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	n := f.acknowledged("quar-0", request)
	if _, ok := n.Labels[v1alpha1.DrainBlockedLabel]; ok || n.Annotations[v1alpha1.DrainBlockedAnnotation] != "" {
		t.Errorf("after the drain: label %q, drainBlocked %q", n.Labels[v1alpha1.DrainBlockedLabel], n.Annotations[v1alpha1.DrainBlockedAnnotation])
	}
	waitMetric(t, `strata_pool_skipped_nodes{reason="quarantined"}`, quarantined, 0)
	logs.Wait(t, timeout, "Drain blocked past its timeout; the node is quarantined and the drain tried again", map[string]string{"name": "quar-0"})
}
