package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Label values Strata sets itself.
const (
	// GateMaintenanceWindow is the gate label of a pool held outside its
	// maintenance windows (or by windows that cannot be read).
	GateMaintenanceWindow = "maintenanceWindow"
	// GateImageApproval is the gate label of a pool whose image waits for
	// approval or was rejected.
	GateImageApproval = "imageApproval"

	// NodeStateUnknown counts a node whose daemon reported no state yet.
	NodeStateUnknown = "Unknown"
)

// durationBuckets span a live apply (seconds) to a slow drain and reboot
// (an hour or two).
var durationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}

var (
	// PoolNodes is the number of a pool's nodes by the state their daemon
	// reports (Done, Working, Rebooting, Degraded, Unknown).
	PoolNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_pool_nodes",
		Help: "Nodes a MachineConfigPool selects, by the state their daemon reports (Done, Working, Rebooting, Degraded; Unknown before it reports).",
	}, []string{"pool", "state"})
	// PoolUpdatedNodes is the pool's status.updatedMachineCount.
	PoolUpdatedNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_pool_updated_nodes",
		Help: "Nodes of a MachineConfigPool that run its target configuration and image (status.updatedMachineCount).",
	}, []string{"pool"})
	// PoolSkippedNodes counts the pool's nodes the rollout passes over.
	PoolSkippedNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_pool_skipped_nodes",
		Help: "Nodes of a MachineConfigPool the rollout passes over, by why: quarantined (a drain blocked past drainTimeout, undrainableNodeBehavior Quarantine) or held (the hold annotation).",
	}, []string{"pool", "reason"})
	// PoolDegraded is 1 while the pool's condition is True.
	PoolDegraded = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_pool_degraded",
		Help: "1 while the MachineConfigPool's condition (Degraded, RenderDegraded, ImageBuildDegraded, NodeDegraded) is True, else 0.",
	}, []string{"pool", "condition"})
	// PoolGateHeld is 1 while a gate holds the pool's nodes back.
	PoolGateHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_pool_gate_held",
		Help: "1 while the gate keeps a MachineConfigPool's pending nodes from starting their update, else 0.",
	}, []string{"pool", "gate"})
	// PoolGateHolds counts the times a gate started holding the pool.
	PoolGateHolds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_pool_gate_holds_total",
		Help: "Times a gate started holding a MachineConfigPool's nodes back.",
	}, []string{"pool", "gate"})

	// NodeUpdatePhaseDuration is how long a phase of a node's update took.
	NodeUpdatePhaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_node_update_phase_duration_seconds",
		Help:    "Time a phase of a node's update took (stage, drain, apply, reboot, verify; total: the whole update), by pool.",
		Buckets: durationBuckets,
	}, []string{"pool", "phase"})
	// NodeUpdates counts node updates that ended.
	NodeUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_node_updates_total",
		Help: "Node updates that ended, by pool, the reboot they took (full, soft, none: applied live or configuration only) and result (Done, Degraded).",
	}, []string{"pool", "reboot", "result"})
	// NodeRollbacks counts updates that ended with the node back on its
	// previous image after a reboot.
	NodeRollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_node_rollbacks_total",
		Help: "Node updates that failed after their reboot and left the node on its previous image (rolled back by the daemon or the boot check), by pool.",
	}, []string{"pool"})
	// Drains counts drains the controller ended.
	Drains = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_drains_total",
		Help: "Node drains that ended, by pool and result (Succeeded; TimedOut: the node was left cordoned and Degraded).",
	}, []string{"pool", "result"})

	// BuildDuration is how long a build took, Job start to end.
	BuildDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_build_duration_seconds",
		Help:    "Time from a build's start to its end, by result.",
		Buckets: []float64{5, 10, 30, 60, 120, 300, 600, 1200, 2400, 3600},
	}, []string{"result"})
	// BuildStageDuration is how long each stage of an ended build took.
	BuildStageDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_build_stage_duration_seconds",
		Help:    "Time a stage of a build took (AdminStage, ConfigLayer, Job, Attach), by the build's result; reused stages are not observed.",
		Buckets: []float64{0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1200, 2400, 3600},
	}, []string{"stage", "result"})
	// Builds counts builds that ended.
	Builds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_builds_total",
		Help: "Builds that ended, by result (Succeeded, Failed, Interrupted).",
	}, []string{"result"})
	// BootDiskDuration is how long making and publishing a boot disk took.
	BootDiskDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_boot_disk_duration_seconds",
		Help:    "Time from a boot disk Job's creation to the disk published or failed, by result.",
		Buckets: []float64{10, 30, 60, 120, 300, 600, 1200, 2400, 3600},
	}, []string{"result"})
	// BuildRestarts counts interrupted builds started again because their
	// inputs became current again.
	BuildRestarts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strata_build_restarts_total",
		Help: "Interrupted builds started again as a new attempt because their inputs became the pool's current ones again.",
	})
	// BootDisks counts boot disks that were published or failed.
	BootDisks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_boot_disks_total",
		Help: "Boot disks of built images that ended, by result (Published, Failed).",
	}, []string{"result"})
)

// collectors are every metric of this package.
var collectors = []prometheus.Collector{PoolNodes, PoolUpdatedNodes, PoolSkippedNodes, PoolDegraded, PoolGateHeld, PoolGateHolds,
	NodeUpdatePhaseDuration, NodeUpdates, NodeRollbacks, Drains,
	BuildDuration, BuildStageDuration, Builds, BuildRestarts, BootDiskDuration, BootDisks}

func init() {
	crmetrics.Registry.MustRegister(collectors...)
}

// NodeStates are the values of the state label of strata_pool_nodes, each
// set on every SetPoolNodes so that a state no node is in reads 0.
var NodeStates = []string{"Done", "Working", "Rebooting", "Degraded", NodeStateUnknown}

// SetPoolNodes sets the pool's node counts: byState counts nodes by their
// reported state ("" counts as Unknown), updated those on the target.
func SetPoolNodes(pool string, byState map[string]int, updated int) {
	for _, s := range NodeStates {
		PoolNodes.WithLabelValues(pool, s).Set(float64(byState[s]))
	}
	PoolUpdatedNodes.WithLabelValues(pool).Set(float64(updated))
	// Counters the alerts read with increase(): served from 0, so that
	// the first rollback is an increase and not a new series.
	NodeRollbacks.WithLabelValues(pool)
}

// Values of strata_pool_skipped_nodes' reason label.
const (
	SkippedQuarantined = "quarantined"
	SkippedHeld        = "held"
)

// SetPoolSkipped sets how many of the pool's nodes the rollout passes
// over: quarantined with a blocked drain, and held by an admin.
func SetPoolSkipped(pool string, quarantined, held int) {
	PoolSkippedNodes.WithLabelValues(pool, SkippedQuarantined).Set(float64(quarantined))
	PoolSkippedNodes.WithLabelValues(pool, SkippedHeld).Set(float64(held))
}

// SetPoolDegraded sets strata_pool_degraded for one of the pool's
// conditions.
func SetPoolDegraded(pool, condition string, isTrue bool) {
	PoolDegraded.WithLabelValues(pool, condition).Set(boolValue(isTrue))
}

// held remembers which gates hold which pool, so that a hold is counted
// once when it starts, whoever calls GateHeld how often.
var held = struct {
	sync.Mutex
	m map[[2]string]bool
}{m: map[[2]string]bool{}}

// GateHeld records whether gate holds the pool's nodes back now: a gate
// holds when it is the reason a node that should start its update does
// not. Call it on every evaluation of the gate (repeats are free); a
// change from not held to held counts one hold.
func GateHeld(pool, gate string, isHeld bool) {
	held.Lock()
	defer held.Unlock()
	k := [2]string{pool, gate}
	if isHeld && !held.m[k] {
		PoolGateHolds.WithLabelValues(pool, gate).Inc()
	}
	held.m[k] = isHeld
	PoolGateHeld.WithLabelValues(pool, gate).Set(boolValue(isHeld))
}

// ForgetGatesExcept removes the pool's gate gauges of gates not in keep:
// a gate taken out of the pool's spec must not stay "held" in a series
// that an alert reads.
func ForgetGatesExcept(pool string, keep map[string]bool) {
	held.Lock()
	defer held.Unlock()
	for k := range held.m {
		if k[0] == pool && !keep[k[1]] {
			delete(held.m, k)
			PoolGateHeld.DeleteLabelValues(pool, k[1])
		}
	}
}

// ForgetPool removes a deleted pool's gauges; its counters and histograms
// stay (a rate over them stays right).
func ForgetPool(pool string) {
	l := prometheus.Labels{"pool": pool}
	for _, g := range []*prometheus.GaugeVec{PoolNodes, PoolUpdatedNodes, PoolSkippedNodes, PoolDegraded, PoolGateHeld} {
		g.DeletePartialMatch(l)
	}
	held.Lock()
	defer held.Unlock()
	for k := range held.m {
		if k[0] == pool {
			delete(held.m, k)
		}
	}
}

// Stage is one ended stage of a build, as its status records it.
type Stage struct {
	Name     string
	Duration time.Duration
	// Reused: nothing ran, so there is no duration to observe.
	Reused bool
}

// BuildEnded counts a build that ended with result and observes its
// duration (when known, >= 0) and that of each stage that ran.
func BuildEnded(result string, duration time.Duration, known bool, stages []Stage) {
	Builds.WithLabelValues(result).Inc()
	if known {
		BuildDuration.WithLabelValues(result).Observe(duration.Seconds())
	}
	for _, s := range stages {
		if !s.Reused {
			BuildStageDuration.WithLabelValues(s.Name, result).Observe(s.Duration.Seconds())
		}
	}
}

// BuildRestarted counts an interrupted build started again.
func BuildRestarted() { BuildRestarts.Inc() }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// BootDiskEnded counts a boot disk that was published or failed and
// observes how long it took, when known.
func BootDiskEnded(result string, duration time.Duration, known bool) {
	BootDisks.WithLabelValues(result).Inc()
	if known {
		BootDiskDuration.WithLabelValues(result).Observe(duration.Seconds())
	}
}
