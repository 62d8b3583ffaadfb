// Package containerfile renders a pool's configuration (a rendered
// MachineConfig and a MachineOSConfig) into a reproducible Containerfile and
// build context. It is pure: no Kubernetes client, no network.
package containerfile
