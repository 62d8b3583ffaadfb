package node

import "github.com/strata-dev/strata/api/v1alpha1"

// newNodes is the pool's status.newNodes: what a node joining the pool
// now starts from (the config server serves it). It follows the target
// while the rollout moves nodes to it, and keeps what it was (prev) while
// the rollout moves no node to the target: a target still waiting for its
// build or approval (there is none), a paused pool, a halted rollout. A
// new node is then neither ahead of the pool (an image not approved, or
// one that failed on maxFailedNodes nodes) nor, once the rollout goes on,
// behind it: the rollout takes it like any node. A pool that never had a
// target to give keeps it absent, and the config server serves nothing.
func newNodes(prev *v1alpha1.NewNodeStatus, t target, paused, halted bool) *v1alpha1.NewNodeStatus {
	if t.Waiting != "" || t.Config == "" {
		return prev
	}
	// An image a halted rollout failed on goes to no new node, even
	// when there is nothing else to give; a paused pool holds its
	// nodes, not what it gave to new ones, unless it gave nothing yet.
	if halted || (paused && prev != nil) {
		return prev
	}
	return &v1alpha1.NewNodeStatus{Image: t.Image, Config: t.Config}
}
