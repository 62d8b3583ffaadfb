// Package fleet holds the fleet rollout benchmark (make bench-fleet): the
// rollout and drain controllers, as strata-controller wires them, roll a
// new image out to 1,000 Nodes in three zones on a real API server, with
// per-zone budgets and progressive steps; an in-process daemon for each
// node plays the node side (drain request, update time drawn from a
// stated distribution, a few failures). It prints the rollout's wall time
// against the ideal for those budgets, how often a budget was exceeded,
// the API writes per node, and the test process's CPU time and peak
// memory. It has no code besides the benchmark.
package fleet
