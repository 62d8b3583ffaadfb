// Package metrics holds Strata's Prometheus metrics, registered in
// controller-runtime's registry (served by the controller's /metrics
// endpoint), and the small functions the controllers call to set them.
// Names carry their unit (_seconds, _total); pool-scoped gauges are
// removed with their pool (ForgetPool).
//
// Node-side metrics (update duration by phase, updates by reboot kind,
// rollbacks, drains) are derived by the controller from the node
// annotations it already watches (controllers/nodemetrics), not served by
// the daemon. Why:
//
//   - one scrape target instead of one per node: the daemon needs no
//     listening port, no hostNetwork port allocation, no Service, no
//     metrics authorization of its own and no Prometheus discovery of
//     every node;
//   - the daemon process ends at every reboot, which is where phases end:
//     its counters would reset on every update and a phase spanning the
//     reboot would need its start written to disk first;
//   - the protocol annotations (desired pair, desiredDrain,
//     lastAppliedDrain, state, disruption) already mark every phase
//     boundary, each written once by one side.
//
// The price: the controller sees a phase boundary when its watch delivers
// it (milliseconds late), a phase in progress when the controller
// started is not timed, and an update whose start it did not see is not
// counted. Phase boundaries and metric meanings are in
// controllers/nodemetrics and in the README's metrics table.
package metrics
