// Package controllers holds Strata's reconcilers, one package per
// reconciler: render (MachineConfigs + pool to a rendered MachineConfig),
// build (MachineOSConfig to MachineOSBuild and build Job) and node rollout.
// This package itself only carries the RBAC every reconciler shares; the
// leader election's Lease is config/rbac/leader_election_role.yaml's, as
// in the kubebuilder layout.
//
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
package controllers
