// Package convergence holds the build side's randomized convergence test:
// random sequences of what admins, GitOps tools and failures do to a
// layered pool (MachineConfig edits and flips back, MachineOSConfig delete
// and recreate, spec changes, the rebuild annotation, a deleted Job, the
// controller restarted, the registry away for a while), each followed by a
// check that the build controller converged: the pool's current inputs are
// built and current, and nothing is left waiting on a build that ended.
//
// It runs against a real kube-apiserver and etcd (envtest) and a real
// registry; the build pods are played (there is no kubelet). The seed is
// printed; STRATA_CONVERGENCE_SEED and STRATA_CONVERGENCE_ONLY replay one
// sequence.
package convergence
