package configserver

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_config_server_requests_total",
		Help: "Requests for a pool's first-boot Ignition, by result: served, unauthorized (no token), forbidden (not the pool's token), unavailable (nothing released for new nodes yet), not_found, error.",
	}, []string{"result"})
	duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_config_server_request_duration_seconds",
		Help:    "Time to answer a request for a pool's first-boot Ignition, by result.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8),
	}, []string{"result"})
	nodeRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_config_server_node_requests_total",
		Help: "Requests of running nodes' daemons for their rendered configs and pull secret, by kind (machineconfig, pullsecret) and result: served, unauthorized (no valid token), forbidden (not the daemon's token, or not the node's), not_found, error.",
	}, []string{"kind", "result"})
	nodeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_config_server_node_request_duration_seconds",
		Help:    "Time to answer a running node's request for its inputs (a TokenReview and a Node read included), by result.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8),
	}, []string{"result"})
)

func init() {
	// The pool is not a label: the path is the caller's, before any
	// authentication, and would let anyone grow the series without bound.
	metrics.Registry.MustRegister(requests, duration, nodeRequests, nodeDuration)
}
