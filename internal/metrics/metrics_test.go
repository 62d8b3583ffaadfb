package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestGateHeldCountsEachHoldOnce: repeated reports of one hold count one
// hold; a release and a new hold count another.
func TestGateHeldCountsEachHoldOnce(t *testing.T) {
	const pool, gate = "gate-test", "cel"
	for i, step := range []struct {
		held         bool
		value, holds float64
	}{
		{false, 0, 0},
		{true, 1, 1},
		{true, 1, 1},
		{true, 1, 1},
		{false, 0, 1},
		{true, 1, 2},
	} {
		GateHeld(pool, gate, step.held)
		v := testutil.ToFloat64(PoolGateHeld.WithLabelValues(pool, gate))
		h := testutil.ToFloat64(PoolGateHolds.WithLabelValues(pool, gate))
		if v != step.value || h != step.holds {
			t.Errorf("step %d (held %v): strata_pool_gate_held %v, strata_pool_gate_holds_total %v; want %v, %v", i, step.held, v, h, step.value, step.holds)
		}
	}
}

// TestForgetPool removes the pool's gauges from what /metrics serves,
// and a hold after it counts anew.
func TestForgetPool(t *testing.T) {
	const pool = "forget-test"
	SetPoolNodes(pool, map[string]int{"Done": 2, "Working": 1}, 2)
	SetPoolDegraded(pool, "Degraded", true)
	GateHeld(pool, GateMaintenanceWindow, true)
	if got := testutil.ToFloat64(PoolNodes.WithLabelValues(pool, "Working")); got != 1 {
		t.Fatalf("strata_pool_nodes{state=Working} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(PoolNodes.WithLabelValues(pool, NodeStateUnknown)); got != 0 {
		t.Fatalf("strata_pool_nodes{state=Unknown} = %v, want 0", got)
	}
	if n := servedGauges(t, pool); n != len(NodeStates)+3 {
		t.Fatalf("%d gauge series of pool %s served, want %d", n, pool, len(NodeStates)+3)
	}
	ForgetPool(pool)
	if n := servedGauges(t, pool); n != 0 {
		t.Errorf("%d gauge series of pool %s served after ForgetPool, want 0", n, pool)
	}
	GateHeld(pool, GateMaintenanceWindow, true)
	if got := testutil.ToFloat64(PoolGateHolds.WithLabelValues(pool, GateMaintenanceWindow)); got != 2 {
		t.Errorf("strata_pool_gate_holds_total = %v after a hold, the pool forgotten, and a hold; want 2", got)
	}
}

// servedGauges counts the gauge series of pool in controller-runtime's
// registry.
func servedGauges(t *testing.T, pool string) int {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
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

func histogram(t *testing.T, o prometheus.Observer) (uint64, float64) {
	t.Helper()
	m := &dto.Metric{}
	if err := o.(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestBuildEnded observes the build and each stage that ran, not the
// reused ones.
func TestBuildEnded(t *testing.T) {
	const result = "TestResult"
	BuildEnded(result, 90*time.Second, true, []Stage{{Name: "AdminStage", Duration: time.Second, Reused: true}, {Name: "ConfigLayer", Duration: 3 * time.Second}})
	BuildEnded(result, 0, false, nil)
	if got := testutil.ToFloat64(Builds.WithLabelValues(result)); got != 2 {
		t.Errorf("strata_builds_total = %v, want 2", got)
	}
	if n, sum := histogram(t, BuildDuration.WithLabelValues(result)); n != 1 || sum != 90 {
		t.Errorf("strata_build_duration_seconds: %d observations of %vs, want 1 of 90s (the second build's duration is unknown)", n, sum)
	}
	if n, sum := histogram(t, BuildStageDuration.WithLabelValues("ConfigLayer", result)); n != 1 || sum != 3 {
		t.Errorf("strata_build_stage_duration_seconds{stage=ConfigLayer}: %d observations of %vs, want 1 of 3s", n, sum)
	}
	if n, _ := histogram(t, BuildStageDuration.WithLabelValues("AdminStage", result)); n != 0 {
		t.Errorf("strata_build_stage_duration_seconds{stage=AdminStage}: %d observations, want none (reused)", n)
	}
}

// TestBootDiskEnded counts every disk and observes the known durations.
func TestBootDiskEnded(t *testing.T) {
	const result = "TestResult"
	BootDiskEnded(result, 42*time.Second, true)
	BootDiskEnded(result, 0, false)
	if got := testutil.ToFloat64(BootDisks.WithLabelValues(result)); got != 2 {
		t.Errorf("strata_boot_disks_total = %v, want 2", got)
	}
	if n, sum := histogram(t, BootDiskDuration.WithLabelValues(result)); n != 1 || sum != 42 {
		t.Errorf("strata_boot_disk_duration_seconds: %d observations of %vs, want 1 of 42s", n, sum)
	}
}
