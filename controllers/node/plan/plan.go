package plan

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Pool is what the planner needs of a MachineConfigPool's spec.
type Pool struct {
	Name           string
	Paused         bool
	MaxUnavailable *intstr.IntOrString // nil means 1
	MaxFailedNodes int32               // below 1 means 1
	// OutsideWindow: no maintenance window of the pool is open (or one
	// cannot be read). No node is taken; nodes already sent their desired
	// pair finish, and the pool stays Updating while they do.
	OutsideWindow bool
	// Held: a gate of the pool (spec.gates) holds every node, or cannot
	// be evaluated. No node is taken, as outside a window.
	Held bool
}

// Target is what the pool's nodes should run.
type Target struct {
	// Config is the rendered MachineConfig's name. "" means the pool has
	// no rendered config yet: no node is taken, and no node counts as
	// updated.
	Config string
	// Image is repo@sha256:.... "" means each node's own OriginalImage:
	// a pool without a MachineOSConfig or osImageURL goes back to what
	// its nodes booted before Strata first changed them.
	Image string
	// Waiting, when not empty, says why the target is not known yet (for
	// example "build X is running"). No node is taken and the pool is not
	// Updated; the counts are still measured against Config and Image, so
	// a caller that leaves them at the previous target keeps its status
	// counts steady while it waits.
	Waiting string
}

// Node is what the planner needs of a Node: its Ready condition, the pools
// that select it and the Strata annotations.
type Node struct {
	Name  string
	Ready bool // the Node's Ready condition
	// Pools lists every pool whose nodeSelector selects the node. More
	// than one is a conflict: the node is reported and never touched.
	Pools []string

	CurrentConfig, CurrentImage, DesiredConfig, DesiredImage, OriginalImage, State, Reason string // the annotations

	// Blocked: a gate holds this node (a blocking pod runs on it). It is
	// not taken, and frees its place for another.
	Blocked bool
}

// Action asks the controller to set the desiredConfig and desiredImage
// annotations of Node.
type Action struct{ Node, Config, Image string }

// NodeProblem names a node and says what is wrong with it.
type NodeProblem struct{ Node, Reason string }

// Result is the plan for one pool and the pool's status as observed.
// Nodes in conflict are left out of every count and list but Conflicts.
type Result struct {
	Actions        []Action // sorted by node name
	MaxUnavailable int

	MachineCount, UpdatedCount, ReadyCount, UnavailableCount, DegradedCount int32

	// FailedCount is the number of Degraded nodes whose desired pair is
	// the target: the failures Halted compares with MaxFailedNodes, as
	// opposed to DegradedCount, which also counts failures of an older
	// target that the rollout is about to retake.
	FailedCount int32
	// PendingCount is the number of nodes that still have to be sent the
	// target and were not taken this time: held back by maxUnavailable,
	// pause, a closed maintenance window or halt, or waiting for the
	// target. WaitingForDaemon nodes
	// are listed there and not counted here.
	PendingCount int32

	// Updated: every node runs the target (current == desired == target,
	// state Done), and the target is known. A pool without nodes is
	// Updated.
	Updated bool
	// Updating: not paused, and some node is being updated or an action
	// is planned.
	Updating bool
	// Halted: at least MaxFailedNodes nodes are Degraded on the target.
	Halted bool

	Degraded         []NodeProblem // nodes with state Degraded, by name, with their reason
	Conflicts        []string      // nodes selected by several pools, by name
	WaitingForDaemon []string      // nodes that need their OriginalImage but have none recorded yet, by name
	// Blocked lists the nodes that would have been taken but for a gate
	// on the node (Node.Blocked), by name.
	Blocked []string
}

// candidate is a node whose desired pair is not the target yet.
type candidate struct {
	node        *Node
	image       string
	unavailable bool
}

// Plan decides which nodes of pool are sent target next and computes the
// pool's counts and flags. Node names are taken to be unique; the result
// does not depend on the order of nodes.
func Plan(pool Pool, target Target, nodes []Node) Result {
	var r Result
	// Without a rendered config there is nothing to measure nodes against
	// or send them; counting every node as not updated would be a lie.
	measured := target.Config != ""
	var candidates []candidate
	inFlight := false

	for i := range nodes {
		n := &nodes[i]
		if len(n.Pools) > 1 {
			r.Conflicts = append(r.Conflicts, n.Name)
			continue
		}
		r.MachineCount++
		unavail := unavailable(n)
		if unavail {
			r.UnavailableCount++
		}
		if n.State == v1alpha1.NodeStateDegraded {
			r.DegradedCount++
			r.Degraded = append(r.Degraded, NodeProblem{Node: n.Name, Reason: n.Reason})
		}
		if updating(n) {
			inFlight = true
		}

		image := target.Image
		if image == "" {
			image = n.OriginalImage
		}
		if image == "" {
			// The daemon records originalImage when it first starts;
			// until then nothing says what "back" is for this node.
			r.WaitingForDaemon = append(r.WaitingForDaemon, n.Name)
			continue
		}
		if !measured {
			continue
		}
		if n.DesiredImage != image || n.DesiredConfig != target.Config {
			if candidates == nil {
				// A settled pool, the common case, has none: allocate on
				// the first.
				candidates = make([]candidate, 0, len(nodes)-i)
			}
			candidates = append(candidates, candidate{node: n, image: image, unavailable: unavail})
			continue
		}
		switch {
		case n.State == v1alpha1.NodeStateDegraded:
			// Failed this very target: the daemon will not retry it, so
			// it stays out of the candidates and counts toward the halt.
			r.FailedCount++
		case n.State == v1alpha1.NodeStateDone && n.CurrentImage == image && n.CurrentConfig == target.Config:
			r.UpdatedCount++
			if n.Ready {
				r.ReadyCount++
			}
		}
	}

	r.MaxUnavailable = maxUnavailable(pool.MaxUnavailable, int(r.MachineCount))
	r.Halted = measured && r.FailedCount >= max(pool.MaxFailedNodes, 1)

	if !pool.Paused && !pool.OutsideWindow && !pool.Held && target.Waiting == "" && measured && !r.Halted && len(candidates) > 0 {
		r.Actions, r.Blocked = take(candidates, r.MaxUnavailable-int(r.UnavailableCount), target.Config)
	}
	r.PendingCount = int32(len(candidates) - len(r.Actions))
	r.Updated = target.Waiting == "" && measured && r.UpdatedCount == r.MachineCount
	r.Updating = !pool.Paused && (inFlight || len(r.Actions) > 0)

	slices.Sort(r.Conflicts)
	slices.Sort(r.WaitingForDaemon)
	slices.SortFunc(r.Degraded, func(a, b NodeProblem) int { return cmp.Compare(a.Node, b.Node) })
	return r
}

// take returns the actions for every unavailable candidate and for
// available candidates, by name, while capacity lasts, and the blocked
// candidates it passed over on the way.
func take(candidates []candidate, capacity int, config string) ([]Action, []string) {
	slices.SortFunc(candidates, func(a, b candidate) int {
		if a.unavailable != b.unavailable {
			if a.unavailable {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.node.Name, b.node.Name)
	})
	var actions []Action
	var blocked []string
	for _, c := range candidates {
		if c.node.Blocked {
			if c.unavailable || capacity > 0 {
				blocked = append(blocked, c.node.Name)
			}
			continue
		}
		if !c.unavailable {
			if capacity <= 0 {
				break
			}
			capacity--
		}
		if actions == nil {
			actions = make([]Action, 0, len(candidates))
		}
		actions = append(actions, Action{Node: c.node.Name, Config: config, Image: c.image})
	}
	slices.SortFunc(actions, func(a, b Action) int { return cmp.Compare(a.Node, b.Node) })
	slices.Sort(blocked)
	return actions, blocked
}

// unavailable reports whether n cannot be counted on to run workloads: not
// Ready, or its daemon is updating it, failed, or has not yet caught up
// with what it was sent.
func unavailable(n *Node) bool {
	switch n.State {
	case v1alpha1.NodeStateWorking, v1alpha1.NodeStateRebooting, v1alpha1.NodeStateDegraded:
		return true
	}
	return !n.Ready || pending(n)
}

// updating reports whether n's daemon still has work to do. A Degraded
// node has given up on its desired pair, so it is not updating even though
// desired differs from current.
func updating(n *Node) bool {
	switch n.State {
	case v1alpha1.NodeStateWorking, v1alpha1.NodeStateRebooting:
		return true
	case v1alpha1.NodeStateDegraded:
		return false
	}
	return pending(n)
}

// pending reports whether n was sent a pair it does not run yet.
func pending(n *Node) bool {
	return (n.DesiredImage != "" && n.DesiredImage != n.CurrentImage) ||
		(n.DesiredConfig != "" && n.DesiredConfig != n.CurrentConfig)
}

// maxUnavailable resolves the pool's maxUnavailable against its node
// count. The CRD rejects values that do not resolve to at least one node;
// should one get through anyway, one node at a time is the safe reading,
// and zero would stall the rollout for good.
func maxUnavailable(v *intstr.IntOrString, machines int) int {
	if v == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, machines, false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}
