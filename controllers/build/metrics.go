package build

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	buildDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_build_duration_seconds",
		Help:    "Time from a build Job's start to the build's end, by result.",
		Buckets: []float64{5, 10, 30, 60, 120, 300, 600, 1200, 2400, 3600},
	}, []string{"result"})
	buildsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_builds_total",
		Help: "Builds that ended, by result (Succeeded, Failed, Interrupted) and reused images.",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(buildDuration, buildsTotal)
}
