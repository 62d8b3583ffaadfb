// Package controllers holds Strata's reconcilers, one package per concern,
// each reconciling one root kind:
//
//   - render: MachineConfigs and a pool to a rendered MachineConfig, with
//     the garbage collector of unused rendered configs (two reconcilers of
//     the MachineConfigPool, in one package because they share the
//     rendered-config naming and ownership);
//   - build: a MachineOSConfig to MachineOSBuilds, their Jobs and images;
//   - node: the rollout of a pool's nodes (per MachineConfigPool) and the
//     drains their daemons ask for (per Node);
//   - degraded: a pool's aggregate Degraded condition, the one part of a
//     pool's status that summarises the others;
//   - pullsecret: the node pull secrets, copied from the build namespace
//     to strata-nodes, the only Secrets the node daemons may read.
//
// A pool's status is shared: each controller writes only its share
// (internal/poolstatus). Which MachineOSConfig layers a pool is the build
// controller's claim, read by everyone through internal/layering.
//
// This package itself only carries the RBAC every reconciler shares; the
// leader election's Lease is config/rbac/leader_election_role.yaml's, as
// in the kubebuilder layout. The scale test of them all together is in
// test/scale.
//
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
package controllers
