package node

import (
	"cmp"
	"slices"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node/plan"
)

// newNodes is the pool's status.newNodes: what a node joining the pool
// now starts from (the config server serves it). It follows the target
// while the rollout moves nodes to it, so that a new node is neither
// behind the pool nor, once the rollout goes on, left out: the rollout
// takes it like any node. It keeps what it was (prev) while the rollout
// moves no node to the target: a target still waiting for its build or
// approval (there is no target image), a paused pool. A halted rollout
// gives new nodes the image it was moving the pool away from, never the
// one it is stuck on: the image and config most of the pool's nodes not
// on the target run (the failed ones were rolled back to it). A pool
// that never had anything to give keeps it absent: the config server
// serves nothing.
func newNodes(prev *v1alpha1.NewNodeStatus, t target, paused, halted bool, nodes []plan.Node) *v1alpha1.NewNodeStatus {
	if t.Waiting != "" || t.Config == "" {
		return prev
	}
	if halted {
		if before := mostRun(nodes, t.Image); before != nil {
			return before
		}
		if prev != nil && prev.Image == t.Image {
			return nil
		}
		return prev
	}
	if paused && prev != nil {
		return prev
	}
	return &v1alpha1.NewNodeStatus{Image: t.Image, Config: t.Config}
}

// mostRun is the image and config most nodes run that are not on image
// (ties broken by name, for a stable status); nil when there are none.
func mostRun(nodes []plan.Node, image string) *v1alpha1.NewNodeStatus {
	type pair struct{ image, config string }
	count := map[pair]int{}
	for _, n := range nodes {
		if n.CurrentImage == "" || n.CurrentImage == image || n.CurrentConfig == "" {
			continue
		}
		count[pair{n.CurrentImage, n.CurrentConfig}]++
	}
	if len(count) == 0 {
		return nil
	}
	var pairs []pair
	for p := range count {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(a.image, b.image), cmp.Compare(a.config, b.config))
	})
	return &v1alpha1.NewNodeStatus{Image: pairs[0].image, Config: pairs[0].config}
}
