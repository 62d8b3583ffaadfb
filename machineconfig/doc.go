// Package machineconfig merges the MachineConfigs a pool selects into one
// rendered configuration and names it by a hash of its content. It is pure:
// the render controller and `stratactl render` share it, so a pool renders
// the same on the cluster and on a laptop.
package machineconfig
