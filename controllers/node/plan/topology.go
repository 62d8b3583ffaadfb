package plan

import (
	"cmp"
	"math"
	"slices"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Topology spreads a rollout over groups of nodes that fail together
// (zones, racks): each group has its own budget beside the pool's, and
// the groups may be taken one after another.
type Topology struct {
	// MaxUnavailable bounds the unavailable nodes of one group, resolved
	// against the group's size (rounded down, at least 1); nil is no
	// bound of the group's own.
	MaxUnavailable *intstr.IntOrString
	// MinAvailable is how many nodes of a group must stay available,
	// resolved against the group's size (rounded up), and at most the
	// size less one: a group can always give up one node while all its
	// others are available, or a group of one node (or a minAvailable of
	// 100%) would never let the rollout finish. nil is none. A group at
	// it takes no node, however its maxUnavailable reads.
	MinAvailable *intstr.IntOrString
	// Sequential finishes one group before the next starts: the groups
	// named in Order first, in that order, then the others by name, the
	// group of nodes without the label ("") last.
	Sequential bool
	Order      []string
}

// GroupResult is one group's counts in a plan.
type GroupResult struct {
	Name                                         string
	MachineCount, UpdatedCount, UnavailableCount int32
	// Capacity is how many more of its nodes the group could give up now
	// (its budgets less its unavailable nodes), before the pool's own;
	// -1 when the group has no budget of its own.
	Capacity int
}

// groupBudget is what take spends of each group.
type groupBudget map[string]int

// groups counts the pool's nodes by group and says how many more each can
// give up; nil without a topology.
func groups(t *Topology, nodes []*Node, updated map[string]bool) ([]GroupResult, groupBudget) {
	if t == nil {
		return nil, nil
	}
	byName := map[string]*GroupResult{}
	for _, n := range nodes {
		g := byName[n.Group]
		if g == nil {
			g = &GroupResult{Name: n.Group}
			byName[n.Group] = g
		}
		g.MachineCount++
		// A quarantined node runs its pods: it does not use up its
		// group's budget either; nor does a failed one that is Ready (it
		// rolled back and runs its previous image: settled, it counts
		// toward maxFailedNodes), or one failure would stop its group
		// for good under a budget of 1.
		settledFailure := n.State == v1alpha1.NodeStateDegraded && n.Ready
		if unavailable(n) && !n.DrainBlocked && !settledFailure {
			g.UnavailableCount++
		}
		if updated[n.Name] {
			g.UpdatedCount++
		}
	}
	out := make([]GroupResult, 0, len(byName))
	budget := groupBudget{}
	for _, g := range byName {
		size := int(g.MachineCount)
		capacity := math.MaxInt
		if t.MaxUnavailable != nil {
			capacity = maxUnavailable(t.MaxUnavailable, size) - int(g.UnavailableCount)
		}
		if t.MinAvailable != nil {
			capacity = min(capacity, size-minAvailable(t.MinAvailable, size)-int(g.UnavailableCount))
		}
		budget[g.Name] = max(capacity, 0)
		g.Capacity = budget[g.Name]
		if capacity == math.MaxInt {
			g.Capacity = -1
		}
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b GroupResult) int { return compareGroups(t, a.Name, b.Name) })
	return out, budget
}

// compareGroups orders groups as a sequential rollout takes them.
func compareGroups(t *Topology, a, b string) int {
	ia, ib := slices.Index(t.Order, a), slices.Index(t.Order, b)
	switch {
	case ia >= 0 && ib >= 0:
		return cmp.Compare(ia, ib)
	case ia >= 0:
		return -1
	case ib >= 0:
		return 1
	case (a == "") != (b == ""):
		if a == "" {
			return 1
		}
		return -1
	}
	return cmp.Compare(a, b)
}

// activeGroup is the group a sequential rollout takes nodes from: the
// first in order with a node still to be sent the target (a held node
// aside) or still updating. "" with ok false when every group is done.
func activeGroup(t *Topology, candidates []candidate, nodes []*Node) (string, bool) {
	open := map[string]bool{}
	for _, c := range candidates {
		if c.node.Hold == "" {
			open[c.node.Group] = true
		}
	}
	for _, n := range nodes {
		if updating(n) {
			open[n.Group] = true
		}
	}
	if len(open) == 0 {
		return "", false
	}
	names := make([]string, 0, len(open))
	for g := range open {
		names = append(names, g)
	}
	slices.SortFunc(names, func(a, b string) int { return compareGroups(t, a, b) })
	return names[0], true
}

// minAvailable resolves a group's minAvailable against its size, a
// percentage rounded up (the safe reading: more nodes stay), at most
// size-1 (Topology.MinAvailable says why).
func minAvailable(v *intstr.IntOrString, size int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(v, size, true)
	if err != nil {
		n = size
	}
	return min(max(n, 0), size-1)
}
