// Package render reconciles MachineConfigPools: it merges the
// MachineConfigs a pool selects into one rendered MachineConfig, named
// rendered-<pool>-<content hash> and owned by the pool, and records it in
// the pool's status.
//
// Two reconcilers, one job each: Reconciler renders, on a change of the
// pool's spec or of a MachineConfig it selects (or selected, before a
// label change); GCReconciler deletes the rendered configs no node and no
// pool needs any more, on a new rendered config or when a node stops
// naming one. A node's progress never re-renders a pool, and whether a
// config is in use is one lookup in an index of Nodes by their current and
// desired config, not a list of every node.
//
// Invalid input never reaches a node: when a selected MachineConfig fails
// validation the pool reports RenderDegraded, naming the MachineConfig and
// the field, and keeps its last good configuration. So it does when the
// merge is too large to store as a MachineConfig (RenderedConfigTooLarge):
// a Create the API server refuses would fail the same way on every retry.
// A failure that may heal by itself (a read or a write the API server did
// not answer) is retried instead, on a backoff of the controller's own
// (internal/retry), and RenderDegraded says so meanwhile: reason Retrying,
// with the error and the time of the next try.
package render
