// Package controllers holds Strata's reconcilers, one package per
// reconciler: render (MachineConfigs + pool to a rendered MachineConfig),
// build (MachineOSConfig to MachineOSBuild and build Job) and node rollout.
// This package itself only carries the RBAC every reconciler shares.
//
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=strata-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
package controllers
