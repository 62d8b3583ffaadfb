// Package node holds the rollout controller: it moves each pool's nodes to
// the pool's target image and configuration a few at a time, and carries
// out the drains the node daemons ask for.
//
// Two reconcilers, one root kind each:
//
//   - Reconciler (per MachineConfigPool) works out the pool's target
//     (target.go), gathers its nodes' states from their annotations, asks
//     the pure planner (plan.Plan) which nodes to take, writes
//     desiredConfig/desiredImage on them, and applies its share of the
//     pool's status (poolstatus.Rollout): the machine counts, the
//     maintenance window's state and the Updated, Updating and
//     NodeDegraded conditions. Outside every maintenance window of the
//     pool (internal/window, read against an injectable clock) no node is
//     taken; the reconcile comes back when the window opens or closes,
//     since no watch sees that happen. It also writes the plan's
//     stage-ahead set as the desiredStage annotation (and removes it
//     from every other node of the pool), records the canary's phase
//     and soak start in status.canary, and comes back at the soak's
//     end, by the same clock. A reconcile that fails in a way that may
//     heal by itself (an input that cannot be read, a node that cannot
//     be written) says so in the Updated condition, reason Retrying,
//     with the time of the next try, and comes back then, on a backoff
//     of its own (internal/retry).
//   - DrainReconciler (per Node) answers a daemon's desiredDrain request:
//     cordon and evict with k8s.io/kubectl/pkg/drain (PodDisruptionBudgets
//     honoured, DaemonSet pods left alone), or uncordon. Draining here and
//     not on the node means no daemon needs the right to evict anything.
//
// The controllers read Nodes from a cache that keeps only what the rollout
// needs (metadata, spec.unschedulable and the Ready condition; see
// CacheByObject): a node's images and heartbeats are most of its size and
// of its updates, and 1,000 nodes must stay cheap.
package node
