package node

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/degraded"
	"github.com/strata-dev/strata/controllers/nodemetrics"
	"github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/test/testenv"
)

// These tests read the metrics from controller-runtime's registry (what
// /metrics serves) after real reconciles: the test plays the daemons, the
// controllers and the update tracker run in a manager.

// startWithMetrics is startControllerWithClock with the node update
// tracker.
func startWithMetrics(t *testing.T, clk clock.PassiveClock) {
	t.Helper()
	tracker := &nodemetrics.Tracker{}
	logs := testenv.NewLogs(1)
	env.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: CacheByObject()}, Logger: logs.Logger()}, func(mgr ctrl.Manager) error {
		if err := (&Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-rollout"), Clock: clk}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := (&degraded.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := tracker.SetupWithManager(mgr); err != nil {
			return err
		}
		return (&DrainReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-drain"), Attempt: 2 * time.Second}).SetupWithManager(mgr)
	})
	// Updates that start from here on are timed.
	eventually(t, "the update tracker follows the nodes", func() error {
		if !tracker.Synced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
}

// waitMetric waits until the series reads want.
func waitMetric(t *testing.T, what string, read func() float64, want float64) {
	t.Helper()
	eventually(t, what, func() error {
		if got := read(); got != want {
			return fmt.Errorf("%s = %v, want %v", what, got, want)
		}
		return nil
	})
}

// histogram reads the count and sum of a histogram series.
func histogram(t *testing.T, pool, phase string) (uint64, float64) {
	t.Helper()
	m := &dto.Metric{}
	must(t, metrics.NodeUpdatePhaseDuration.WithLabelValues(pool, phase).(prometheus.Metric).Write(m))
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func gauge(g prometheus.Gauge) float64 { return testutil.ToFloat64(g) }

// TestMetricsOfAnUpdateAndARollback plays two nodes' daemons through an
// update with a full reboot and one rolled back after its reboot, and
// checks every node-side series and the pool's node counts.
func TestMetricsOfAnUpdateAndARollback(t *testing.T) {
	f := newFixture(t, "mtr", 2, func(p *v1alpha1.MachineConfigPool) { p.Spec.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2)) })
	pool := "mtr"
	cfg := "rendered-mtr-1"
	img := image('c')
	begin := time.Now()
	startWithMetrics(t, nil)
	waitMetric(t, "Done nodes", func() float64 { return testutil.ToFloat64(metrics.PoolNodes.WithLabelValues(pool, "Done")) }, 2)
	f.layer(cfg, img)
	f.waitTaken(cfg, img, 2)
	key := v1alpha1.UpdateKey(img, cfg)
	good, bad := "mtr-0", "mtr-1"

	// Both report Working: the pool's gauges follow.
	for _, n := range f.nodes {
		f.annotate(n, v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking)
	}
	waitMetric(t, "Working nodes", func() float64 { return testutil.ToFloat64(metrics.PoolNodes.WithLabelValues(pool, "Working")) }, 2)
	if got := testutil.ToFloat64(metrics.PoolNodes.WithLabelValues(pool, "Done")); got != 0 {
		t.Errorf("strata_pool_nodes{state=Done} = %v, want 0", got)
	}
	if got := testutil.ToFloat64(metrics.PoolUpdatedNodes.WithLabelValues(pool)); got != 0 {
		t.Errorf("strata_pool_updated_nodes = %v, want 0", got)
	}

	// Both stage, decide a full reboot and ask for the drain, which the
	// drain controller carries out.
	for _, n := range f.nodes {
		f.annotate(n, v1alpha1.DisruptionAnnotation, "Reboot: the base changed", v1alpha1.DesiredDrainAnnotation, v1alpha1.DrainRequestPrefix+key)
	}
	waitMetric(t, "drains Succeeded", func() float64 { return testutil.ToFloat64(metrics.Drains.WithLabelValues(pool, "Succeeded")) }, 2)

	// The good node reboots and comes back healthy.
	f.annotate(good, v1alpha1.StateAnnotation, v1alpha1.NodeStateRebooting)
	waitMetric(t, "Rebooting nodes", func() float64 { return testutil.ToFloat64(metrics.PoolNodes.WithLabelValues(pool, "Rebooting")) }, 1)
	f.finish(good)
	waitMetric(t, "updates{full,Done}", func() float64 { return testutil.ToFloat64(metrics.NodeUpdates.WithLabelValues(pool, "full", "Done")) }, 1)
	waitMetric(t, "updated nodes", func() float64 { return testutil.ToFloat64(metrics.PoolUpdatedNodes.WithLabelValues(pool)) }, 1)

	// The bad one reboots, waits for its health, rolls back and fails.
	f.annotate(bad, v1alpha1.StateAnnotation, v1alpha1.NodeStateRebooting)
	waitMetric(t, "reboot phases", func() float64 { c, _ := histogram(t, pool, "reboot"); return float64(c) }, 1)
	f.annotate(bad, v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking)
	waitMetric(t, "reboot phases", func() float64 { c, _ := histogram(t, pool, "reboot"); return float64(c) }, 2)
	f.annotate(bad, v1alpha1.StateAnnotation, v1alpha1.NodeStateRebooting, v1alpha1.ReasonAnnotation, "rolling back: unhealthy")
	waitMetric(t, "verify phases", func() float64 { c, _ := histogram(t, pool, "verify"); return float64(c) }, 1)
	f.annotate(bad, v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded, v1alpha1.ReasonAnnotation, "unhealthy; rolled back to "+image('0'),
		v1alpha1.DesiredDrainAnnotation, v1alpha1.UncordonRequestPrefix+key)
	waitMetric(t, "rollbacks", func() float64 { return testutil.ToFloat64(metrics.NodeRollbacks.WithLabelValues(pool)) }, 1)
	elapsed := time.Since(begin).Seconds()

	if got := testutil.ToFloat64(metrics.NodeUpdates.WithLabelValues(pool, "full", "Degraded")); got != 1 {
		t.Errorf("strata_node_updates_total{reboot=full,result=Degraded} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.NodeUpdates.WithLabelValues(pool, "none", "Done")); got != 0 {
		t.Errorf("strata_node_updates_total{reboot=none,result=Done} = %v, want 0", got)
	}
	if got := testutil.ToFloat64(metrics.Drains.WithLabelValues(pool, "TimedOut")); got != 0 {
		t.Errorf("strata_drains_total{result=TimedOut} = %v, want 0", got)
	}
	// Two updates' phases: each observed once per node (reboot: three
	// reboots in all), and the phases of an update partition its total.
	want := map[string]uint64{"stage": 2, "drain": 2, "apply": 2, "reboot": 3, "verify": 1, "total": 2}
	var phases, total float64
	for phase, n := range want {
		c, sum := histogram(t, pool, phase)
		if c != n {
			t.Errorf("strata_node_update_phase_duration_seconds{phase=%s} has %d observations, want %d", phase, c, n)
		}
		if sum < 0 || sum > elapsed*float64(n) {
			t.Errorf("phase %s took %.3fs in all, want 0 to %.3fs", phase, sum, elapsed*float64(n))
		}
		if phase == "total" {
			total = sum
		} else {
			phases += sum
		}
	}
	if math.Abs(phases-total) > 1e-6 {
		t.Errorf("the phases took %.6fs, the updates %.6fs: they must add up", phases, total)
	}

	// The pool's Degraded conditions, as the degraded controller wrote them.
	waitMetric(t, "NodeDegraded", func() float64 { return gauge(metrics.PoolDegraded.WithLabelValues(pool, v1alpha1.PoolNodeDegraded)) }, 1)
	waitMetric(t, "Degraded", func() float64 { return gauge(metrics.PoolDegraded.WithLabelValues(pool, v1alpha1.PoolDegraded)) }, 1)
	if got := gauge(metrics.PoolDegraded.WithLabelValues(pool, v1alpha1.PoolImageBuildDegraded)); got != 0 {
		t.Errorf("strata_pool_degraded{condition=ImageBuildDegraded} = %v, want 0", got)
	}
	waitMetric(t, "Degraded nodes", func() float64 { return testutil.ToFloat64(metrics.PoolNodes.WithLabelValues(pool, "Degraded")) }, 1)

	// A deleted pool's gauges go with it.
	must(t, env.Client.Delete(context.Background(), f.poolObj()))
	eventually(t, "the pool's gauges are removed", func() error {
		if n := servedFor(t, pool); n != 0 {
			return fmt.Errorf("%d gauge series of pool %s still served", n, pool)
		}
		return nil
	})
}

// servedFor counts the gauge series labelled with pool that /metrics
// serves.
func servedFor(t *testing.T, pool string) int {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	must(t, err)
	n := 0
	for _, mf := range families {
		if mf.GetType() != dto.MetricType_GAUGE {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pool" && l.GetValue() == pool {
					n++
				}
			}
		}
	}
	return n
}

// TestMaintenanceWindowHoldIsAGateHold checks the window's gate series:
// held while a closed window keeps pending nodes back, released when it
// opens, not held while closed with nothing to update, and each hold
// counted once however often the pool is reconciled.
func TestMaintenanceWindowHoldIsAGateHold(t *testing.T) {
	f := newFixture(t, "mwin", 1, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{
			Days: []v1alpha1.Weekday{v1alpha1.Saturday}, Start: "22:00",
			Duration: metav1.Duration{Duration: 2 * time.Hour}, TimeZone: "UTC",
		}}
	})
	pool := "mwin"
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC))
	startWithMetrics(t, clk)
	held := func() float64 {
		return gauge(metrics.PoolGateHeld.WithLabelValues(pool, metrics.GateMaintenanceWindow))
	}
	holds := func() float64 {
		return testutil.ToFloat64(metrics.PoolGateHolds.WithLabelValues(pool, metrics.GateMaintenanceWindow))
	}

	// Closed, and the node has its first config to take: held, once.
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonOutsideMaintenanceWindow, "")
	waitMetric(t, "strata_pool_gate_held{gate=maintenanceWindow}", held, 1)
	f.tick(1)
	f.tick(2)
	waitMetric(t, "strata_pool_gate_holds_total{gate=maintenanceWindow}", holds, 1)
	if got := gauge(metrics.PoolGateHeld.WithLabelValues(pool, metrics.GateImageApproval)); got != 0 {
		t.Errorf("strata_pool_gate_held{gate=imageApproval} = %v, want 0", got)
	}

	// Open: released, the node is taken and finishes.
	clk.SetTime(time.Date(2026, 10, 24, 22, 30, 0, 0, time.UTC))
	f.tick(3)
	taken := f.waitTaken("rendered-mwin-1", image('0'), 1)
	waitMetric(t, "strata_pool_gate_held{gate=maintenanceWindow}", held, 0)
	f.finish(taken[0])
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "")

	// Closed again with nothing to update: not held.
	clk.SetTime(time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC))
	f.tick(4)
	f.waitWindow(false, "", "2026-10-31T22:00:00Z")
	if held() != 0 || holds() != 1 {
		t.Errorf("closed with nothing to update: held %v, holds %v; want 0, 1", held(), holds())
	}

	// A new config while closed: held again, a second hold.
	f.layer("rendered-mwin-1", image('d'))
	waitMetric(t, "strata_pool_gate_held{gate=maintenanceWindow}", held, 1)
	waitMetric(t, "strata_pool_gate_holds_total{gate=maintenanceWindow}", holds, 2)
}

// TestDrainTimeoutIsCounted: a drain a PodDisruptionBudget blocks past
// the pool's drainTimeout counts as TimedOut, not Succeeded.
func TestDrainTimeoutIsCounted(t *testing.T) {
	ctx := context.Background()
	pool := "mdrain"
	f := newFixture(t, pool, 1, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.DrainTimeout = &metav1.Duration{Duration: 3 * time.Second}
	})
	node := f.nodes[0]
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "mdrain-"}}
	must(t, env.Client.Create(ctx, ns))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "guarded", Labels: map[string]string{"app": "guarded"}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/app@sha256:" + digest('1')}}},
	}
	must(t, env.Client.Create(ctx, pod))
	// Evictions ignore budgets for pending pods: make it run.
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	must(t, env.Client.Status().Update(ctx, pod))
	one := intstr.FromInt32(1)
	must(t, env.Client.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "keep-one"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}))
	startWithMetrics(t, nil)
	taken := f.waitTaken("rendered-mdrain-1", image('0'), 1)
	n := f.node(taken[0])
	key := v1alpha1.UpdateKey(n.Annotations[v1alpha1.DesiredImageAnnotation], n.Annotations[v1alpha1.DesiredConfigAnnotation])
	f.annotate(node, v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking, v1alpha1.DesiredDrainAnnotation, v1alpha1.DrainRequestPrefix+key)
	// The daemon reports the controller's verdict as Degraded.
	var reason string
	eventually(t, "the drain timeout's verdict", func() error {
		value := f.node(node).Annotations[v1alpha1.DrainFailureAnnotation]
		request, why, ok := v1alpha1.ParseDrainFailure(value)
		if !ok || request != v1alpha1.DrainRequestPrefix+key {
			return fmt.Errorf("drainFailure %q", value)
		}
		reason = why
		return nil
	})
	f.annotate(node, v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded, v1alpha1.ReasonAnnotation, reason)

	waitMetric(t, "strata_drains_total{result=TimedOut}", func() float64 { return testutil.ToFloat64(metrics.Drains.WithLabelValues(pool, "TimedOut")) }, 1)
	if got := testutil.ToFloat64(metrics.Drains.WithLabelValues(pool, "Succeeded")); got != 0 {
		t.Errorf("strata_drains_total{result=Succeeded} = %v, want 0", got)
	}
	// The update ended Degraded with no reboot: not a rollback.
	waitMetric(t, "strata_node_updates_total{reboot=none,result=Degraded}", func() float64 {
		return testutil.ToFloat64(metrics.NodeUpdates.WithLabelValues(pool, "none", "Degraded"))
	}, 1)
	if got := testutil.ToFloat64(metrics.NodeRollbacks.WithLabelValues(pool)); got != 0 {
		t.Errorf("strata_node_rollbacks_total = %v, want 0", got)
	}
	if c, sum := histogram(t, pool, "drain"); c != 1 || sum < 3 {
		t.Errorf("drain phase: %d observations of %.3fs, want 1 of at least the 3s drainTimeout", c, sum)
	}
}
