package node

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/gate"
	"github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/test/testenv"
	"github.com/strata-dev/strata/test/testprometheus"
)

// gateRecheck is the tests' re-check interval: short, so that a gate's
// clearing is seen within the tests' deadlines.
const gateRecheck = time.Second

// startGatedController runs the rollout reconciler with gates read
// uncached, as strata-controller does, re-checked every gateRecheck.
func startGatedController(t *testing.T) {
	t.Helper()
	env.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: CacheByObject()}, Logger: testenv.NewLogs(0).Logger()}, func(mgr ctrl.Manager) error {
		return (&Reconciler{
			Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-rollout"),
			Gates:       &gate.Evaluator{Reader: mgr.GetAPIReader(), Namespace: "default", Timeout: 5 * time.Second},
			GateRecheck: gateRecheck,
		}).SetupWithManager(mgr)
	})
}

// assertNoneTaken checks, after a condition that the same reconcile
// wrote after the nodes, that no node was sent the target.
func (f *fixture) assertNoneTaken(config, img, why string) {
	f.t.Helper()
	if got := f.taken(config, img); len(got) != 0 {
		f.t.Fatalf("nodes %v were taken while %s", got, why)
	}
}

// TestPrometheusGateHoldsUntilTheAlertClears: a real Prometheus fires an
// alert; the pool holds, naming it; the rule goes, and the rollout goes on.
func TestPrometheusGateHoldsUntilTheAlertClears(t *testing.T) {
	prom := testprometheus.Start(t, testprometheus.Rules(
		testprometheus.Rule{Alert: "CephHealthError", Expr: "vector(1)", Labels: map[string]string{"severity": "critical"}},
		testprometheus.Rule{Alert: "Watchdog", Expr: "vector(1)"},
	))
	prom.WaitFiring("CephHealthError", "Watchdog")
	f := newFixture(t, "pg", 2, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.Gates = []v1alpha1.RolloutGate{{Name: "alerts", Prometheus: &v1alpha1.PrometheusGate{
			URL: prom.URL, Alerts: &v1alpha1.AlertFilter{IgnoreNameRegexp: "Watchdog", Labels: map[string]string{"severity": "critical"}},
		}}}
	})
	f.layer("rendered-pg-1", image('a'))
	startGatedController(t)

	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonHeldByGate,
		`Held by gate "alerts" (prometheus): firing: CephHealthError{severity="critical"}; 0 of 2 nodes run rendered-pg-1`)
	f.waitCondition(v1alpha1.PoolUpdating, "False", v1alpha1.ReasonHeldByGate, "CephHealthError")
	f.waitPoolEvent(corev1.EventTypeNormal, v1alpha1.ReasonHeldByGate, "CephHealthError")
	f.assertNoneTaken("rendered-pg-1", image('a'), "an alert fired")
	gateHeld := func() float64 { return testutil.ToFloat64(metrics.PoolGateHeld.WithLabelValues(f.pool, "alerts")) }
	waitMetric(t, `strata_pool_gate_held{gate="alerts"}`, gateHeld, 1)

	prom.SetRules(testprometheus.Rules(testprometheus.Rule{Alert: "Watchdog", Expr: "vector(1)"}))
	prom.WaitFiring("Watchdog")
	f.waitTaken("rendered-pg-1", image('a'), 1)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut, "0 of 2 nodes run")
	waitMetric(t, `strata_pool_gate_held{gate="alerts"}`, gateHeld, 0)
}

// TestCELGateOverACustomResource holds the rollout on a field of a real
// custom resource, refuses an expression that does not compile naming
// its field, and releases when the object says healthy.
func TestCELGateOverACustomResource(t *testing.T) {
	ctx := context.Background()
	// A MachineConfigPool stands for any custom resource (a storage
	// cluster's): the gate reads it as unstructured, by apiVersion/kind.
	health := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "cg-health", Labels: map[string]string{"health": "HEALTH_WARN"}}}
	must(t, env.Client.Create(ctx, health))
	celGate := func(expr string) []v1alpha1.RolloutGate {
		return []v1alpha1.RolloutGate{{Name: "storage", CEL: &v1alpha1.CELGate{
			APIVersion: "machineconfiguration.strata.dev/v1alpha1", Kind: "MachineConfigPool", Name: "cg-health", Expression: expr,
		}}}
	}
	f := newFixture(t, "cg", 2, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.Gates = celGate(`object.metadata.labels.health ==`)
	})
	f.layer("rendered-cg-1", image('a'))
	startGatedController(t)

	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonInvalidGate,
		`No node is taken until the gates are fixed: spec.gates[0].cel.expression: Invalid value: "object.metadata.labels.health ==": ERROR`)
	f.waitPoolEvent(corev1.EventTypeWarning, v1alpha1.ReasonInvalidGate, "spec.gates[0].cel.expression")
	f.assertNoneTaken("rendered-cg-1", image('a'), "the gate did not compile")

	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := f.poolObj()
		p.Spec.Gates = celGate(`object.metadata.labels.health == "HEALTH_OK"`)
		return env.Client.Update(ctx, p)
	}))
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonHeldByGate,
		`Held by gate "storage" (cel): object.metadata.labels.health == "HEALTH_OK" is false for MachineConfigPool cg-health (machineconfiguration.strata.dev/v1alpha1)`)
	f.assertNoneTaken("rendered-cg-1", image('a'), "the object was not healthy")

	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(health), health); err != nil {
			return err
		}
		health.Labels["health"] = "HEALTH_OK"
		return env.Client.Update(ctx, health)
	}))
	f.waitTaken("rendered-cg-1", image('a'), 1)
}

// TestBlockingPodKeepsItsNodeOnly: a node running a matching pod is
// passed over, the next node is taken in its place; once the pod is gone
// the node is taken too.
func TestBlockingPodKeepsItsNodeOnly(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bg-jobs", Labels: map[string]string{"backups": "true"}}}
	must(t, env.Client.Create(ctx, ns))
	f := newFixture(t, "bg", 2, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.MaxUnavailable = ptrIntOrString(intstr.FromInt32(1))
		p.Spec.Gates = []v1alpha1.RolloutGate{{Name: "backups", BlockingPods: &v1alpha1.BlockingPodsGate{
			PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "backup"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"backups": "true"}},
		}}}
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "backup", Labels: map[string]string{"app": "backup"}},
		Spec: corev1.PodSpec{NodeName: "bg-0", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	must(t, env.Client.Create(ctx, pod))
	// The same pod elsewhere does not block: another namespace.
	other := pod.DeepCopy()
	other.Namespace, other.Spec.NodeName, other.ResourceVersion, other.UID = "default", "bg-1", "", ""
	must(t, env.Client.Create(ctx, other))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, other) })
	f.layer("rendered-bg-1", image('a'))
	startGatedController(t)

	// bg-0 comes first by name, but its backup runs: bg-1 goes instead.
	if got := f.waitTaken("rendered-bg-1", image('a'), 1); got[0] != "bg-1" {
		t.Fatalf("taken %v, want bg-1", got)
	}
	// Gates are checked when a node is to be taken: with bg-1 in flight
	// and maxUnavailable 1, none is; once it is done, bg-0 is held.
	f.finish("bg-1")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonHeldByGate,
		`Every node to be taken is held by a gate: node bg-0 by gate "backups" (blockingPods): pod bg-jobs/backup runs on it; 1 of 2 nodes run`)
	if got := f.taken("rendered-bg-1", image('a')); len(got) != 1 {
		t.Fatalf("taken %v while bg-0's backup runs", got)
	}

	// No kubelet here: deleted at once, as a kubelet would once it stops.
	must(t, env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	f.waitTaken("rendered-bg-1", image('a'), 2)
}
