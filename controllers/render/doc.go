// Package render reconciles MachineConfigPools: it merges the
// MachineConfigs a pool selects into one rendered MachineConfig, named
// rendered-<pool>-<content hash> and owned by the pool, records it in the
// pool's status, and deletes rendered configs no longer needed.
//
// Invalid input never reaches a node: when a selected MachineConfig fails
// validation the pool reports RenderDegraded, naming the MachineConfig and
// the field, and keeps its last good configuration. So it does when the
// merge is too large to store as a MachineConfig (RenderedConfigTooLarge):
// a Create the API server refuses would fail the same way on every retry.
package render
