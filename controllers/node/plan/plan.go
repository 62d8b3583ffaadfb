package plan

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Pool is what the planner needs of a MachineConfigPool's spec.
type Pool struct {
	Name           string
	Paused         bool
	MaxUnavailable *intstr.IntOrString // nil means 1
	MaxFailedNodes int32               // below 1 means 1
	// MaxBlockedNodes is how many quarantined nodes (Node.DrainBlocked)
	// the rollout goes on beside; with more, no node is taken.
	MaxBlockedNodes int
	// OutsideWindow: no maintenance window of the pool is open (or one
	// cannot be read). No node is taken; nodes already sent their desired
	// pair finish, and the pool stays Updating while they do.
	OutsideWindow bool
	// Held: a gate of the pool (spec.gates) holds every node, or cannot
	// be evaluated. No node is taken, as outside a window.
	Held bool
	// StageAhead is how many available nodes, beyond those taken, are
	// asked to download the target ahead (Result.Stage); 0 is none.
	StageAhead int
	// Canary, when set, makes its nodes take a new target first and the
	// rest wait for its soak (canary.go).
	Canary *Canary
	// Steps, when set, sends the target in progressive steps, each
	// soaked and checked against a success threshold (steps.go).
	Steps *Steps
	// Topology, when set, gives each group of nodes (Node.Group) a
	// budget of its own beside MaxUnavailable, and may take the groups
	// one after another (topology.go).
	Topology *Topology
	// Now is the time of the plan; only the canary's soak reads it.
	Now time.Time
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
	// Cordoned: the Node is unschedulable. It counts as unavailable, as
	// the Machine Config Operator counts it: no workload can land there,
	// also in the moment between an update's end and its uncordon.
	Cordoned bool
	// Pools lists every pool whose nodeSelector selects the node. More
	// than one is a conflict: the node is reported and never touched.
	Pools []string

	CurrentConfig, CurrentImage, DesiredConfig, DesiredImage, OriginalImage, State, Reason string // the annotations

	// Blocked: a gate holds this node (a blocking pod runs on it). It is
	// not taken, and frees its place for another.
	Blocked bool
	// DesiredStage and StagedImage are the stage-ahead annotations: the
	// image the controller asked the node to download ahead, and the
	// image its daemon holds staged locked.
	DesiredStage, StagedImage string
	// StagedLive is the stagedLive annotation: the update key of the
	// update the node holds staged ahead and whose disruption its daemon
	// decided Live without a drain.
	StagedLive string
	// InCanary: the pool's canary selector selects the node (read only
	// when the canary is by selector).
	InCanary bool
	// Group is the value of the pool's topology label on the node, ""
	// without one (read only with a Topology).
	Group string
	// DrainBlocked: the node's drain is past its timeout and quarantined
	// (the drainBlocked annotation names its current request), with
	// DrainBlockedReason. It is cordoned but its pods still run: it
	// counts toward Pool.MaxBlockedNodes, not toward maxUnavailable or a
	// group's budget, nor as failed.
	DrainBlocked       bool
	DrainBlockedReason string
	// Hold is the reason an admin gave for keeping the rollout away from
	// this node (the hold annotation); "" is none. A held node is not
	// sent a new target nor asked to stage ahead, and does not count as
	// failed; one already sent its target finishes.
	Hold string
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

	// Stage lists every node that should be asked to download its image
	// ahead (the desiredStage annotation), sorted by node name: at most
	// Pool.StageAhead, and no node taken. Every other node of the pool
	// should have none.
	Stage []Action
	// StagedAheadCount is the number of nodes not yet sent the target
	// that hold its image staged ahead.
	StagedAheadCount int32
	// Canary is the canary's progress; nil without one, or without a
	// measured target.
	Canary *CanaryResult

	Degraded         []NodeProblem // nodes with state Degraded, by name, with their reason
	Conflicts        []string      // nodes selected by several pools, by name
	WaitingForDaemon []string      // nodes that need their OriginalImage but have none recorded yet, by name
	// Blocked lists the nodes that would have been taken but for a gate
	// on the node (Node.Blocked), by name.
	Blocked []string
	// Quarantined lists the nodes whose drain is blocked past its timeout
	// (Node.DrainBlocked), by name, with what blocks it; QuarantinedCount
	// is how many of them are unavailable (all, normally), which the
	// capacity does not count. QuarantineFull: more than
	// Pool.MaxBlockedNodes, so no node is taken.
	Quarantined      []NodeProblem
	QuarantinedCount int32
	QuarantineFull   bool
	// Held lists the nodes still to be sent the target that an admin
	// holds (Node.Hold), by name, with the hold's reason.
	Held []NodeProblem
	// Step is the progressive rollout's progress; nil without steps, or
	// without a measured target.
	Step *StepResult
	// Groups are the topology's groups in the order a sequential rollout
	// takes them; nil without a topology.
	Groups []GroupResult
	// ActiveGroup is the group a sequential rollout takes nodes from now;
	// "" when it is not sequential or every group is done.
	ActiveGroup string
}

// candidate is a node whose desired pair is not the target yet.
type candidate struct {
	node        *Node
	image       string
	unavailable bool
	canary      bool
}

// staged says whether the candidate holds its image staged ahead.
func (c candidate) staged() bool { return c.node.StagedImage == c.image }

// asked says whether the candidate was asked to stage its image ahead.
func (c candidate) asked() bool { return c.node.DesiredStage == c.image }

// live says whether the candidate holds its image staged ahead and its
// daemon decided that the update to image and config is applied live,
// without a drain: taking it costs no capacity, as it never leaves the
// node unschedulable or NotReady.
func (c candidate) live(config string) bool {
	return c.staged() && c.node.StagedLive == v1alpha1.UpdateKey(c.image, config)
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
	canary := canaryMembers(pool.Canary, nodes)
	var canaryCount, canaryUpdated int32
	// For the topology's groups: the pool's nodes and those updated.
	var members []*Node
	var updatedSet map[string]bool
	if pool.Topology != nil {
		updatedSet = map[string]bool{}
	}

	for i := range nodes {
		n := &nodes[i]
		if len(n.Pools) > 1 {
			r.Conflicts = append(r.Conflicts, n.Name)
			continue
		}
		r.MachineCount++
		if pool.Topology != nil {
			members = append(members, n)
		}
		unavail := unavailable(n)
		if unavail {
			r.UnavailableCount++
		}
		if n.DrainBlocked {
			r.Quarantined = append(r.Quarantined, NodeProblem{Node: n.Name, Reason: n.DrainBlockedReason})
			if unavail {
				r.QuarantinedCount++
			}
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
		inCanary := canary[n.Name]
		if inCanary {
			canaryCount++
		}
		if n.StagedImage == image && n.DesiredImage != image {
			r.StagedAheadCount++
		}
		if n.DesiredImage != image || n.DesiredConfig != target.Config {
			if candidates == nil {
				// A settled pool, the common case, has none: allocate on
				// the first.
				candidates = make([]candidate, 0, len(nodes)-i)
			}
			candidates = append(candidates, candidate{node: n, image: image, unavailable: unavail, canary: inCanary})
			if n.Hold != "" {
				r.Held = append(r.Held, NodeProblem{Node: n.Name, Reason: n.Hold})
			}
			continue
		}
		switch {
		case n.State == v1alpha1.NodeStateDegraded:
			// Failed this very target: the daemon will not retry it, so
			// it stays out of the candidates and counts toward the halt.
			r.FailedCount++
		case n.State == v1alpha1.NodeStateDone && n.CurrentImage == image && n.CurrentConfig == target.Config:
			r.UpdatedCount++
			if updatedSet != nil {
				updatedSet[n.Name] = true
			}
			if n.Ready {
				r.ReadyCount++
			}
			if inCanary {
				canaryUpdated++
			}
		}
	}

	r.MaxUnavailable = maxUnavailable(pool.MaxUnavailable, int(r.MachineCount))
	r.QuarantineFull = len(r.Quarantined) > pool.MaxBlockedNodes
	r.Halted = measured && r.FailedCount >= max(pool.MaxFailedNodes, 1)

	// The canary decides which candidates may be taken now (eligible)
	// and which are the next ones once those are (the stage-ahead pool).
	eligible, next := candidates, candidates
	if pool.Canary != nil && measured {
		r.Canary = canaryPhase(pool.Canary, pool.Now, canaryCount, canaryUpdated, candidates)
		// One failure on the target while the canary updates or soaks
		// halts, whatever maxFailedNodes says: that is what it is for.
		if r.Canary.Phase != v1alpha1.CanaryDone && r.FailedCount > 0 {
			r.Halted = true
		}
		eligible, next = r.Canary.split(candidates)
	}
	if pool.Steps != nil && measured {
		sent := int(r.MachineCount) - len(r.WaitingForDaemon) - len(candidates)
		r.Step = stepPhase(pool.Steps, pool.Now, int(r.MachineCount), sent, int(r.UpdatedCount), inFlight)
		if r.Step.Phase == StepFailed {
			r.Halted = true
		}
		// The step bounds how many more nodes are sent, in turn.
		// A held node is never taken: it does not use up the step.
		if r.Step.allowance < len(eligible) {
			eligible = slices.DeleteFunc(slices.Clone(eligible), func(c candidate) bool { return c.node.Hold != "" })
			slices.SortFunc(eligible, byTurn)
			eligible = eligible[:min(r.Step.allowance, len(eligible))]
		}
	}
	var budget groupBudget
	if measured {
		r.Groups, budget = groups(pool.Topology, members, updatedSet)
	}
	if t := pool.Topology; t != nil && t.Sequential && measured {
		// One group after another: only the first group in order that
		// is not done yet is taken from.
		if g, ok := activeGroup(t, candidates, members); ok {
			r.ActiveGroup = g
			eligible = slices.DeleteFunc(slices.Clone(eligible), func(c candidate) bool { return c.node.Group != g })
		}
	}

	if !pool.Paused && !pool.OutsideWindow && !pool.Held && target.Waiting == "" && measured && !r.Halted && !r.QuarantineFull && len(eligible) > 0 {
		// A quarantined node is cordoned but runs its pods: it does not
		// use up maxUnavailable (QuarantineFull bounds how many there are).
		capacity := r.MaxUnavailable - int(r.UnavailableCount-r.QuarantinedCount)
		r.Actions, r.Blocked = take(eligible, capacity, capacity+pool.StageAhead, target.Config, budget)
	}
	if pool.StageAhead > 0 && !pool.Paused && target.Waiting == "" && measured && !r.Halted {
		r.Stage = stageAhead(next, r.Actions, pool.StageAhead)
	}
	r.PendingCount = int32(len(candidates) - len(r.Actions))
	r.Updated = target.Waiting == "" && measured && r.UpdatedCount == r.MachineCount
	soaking := (r.Canary != nil && r.Canary.Phase == v1alpha1.CanarySoaking && !r.Halted) ||
		(r.Step != nil && r.Step.Phase == StepSoaking)
	r.Updating = !pool.Paused && (inFlight || len(r.Actions) > 0 || soaking)

	slices.Sort(r.Conflicts)
	slices.Sort(r.WaitingForDaemon)
	slices.SortFunc(r.Degraded, func(a, b NodeProblem) int { return cmp.Compare(a.Node, b.Node) })
	slices.SortFunc(r.Held, func(a, b NodeProblem) int { return cmp.Compare(a.Node, b.Node) })
	slices.SortFunc(r.Quarantined, func(a, b NodeProblem) int { return cmp.Compare(a.Node, b.Node) })
	return r
}

// byTurn orders candidates as the rollout takes them: unavailable ones
// first (they cost no capacity), then those holding their image staged
// ahead, then those asked to stage it (their download started), then by
// name. Without staging ahead this is name order, and the stage-ahead
// set stays the same from one plan to the next.
func byTurn(a, b candidate) int {
	if a.unavailable != b.unavailable {
		if a.unavailable {
			return -1
		}
		return 1
	}
	if a.staged() != b.staged() {
		if a.staged() {
			return -1
		}
		return 1
	}
	if a.asked() != b.asked() {
		if a.asked() {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.node.Name, b.node.Name)
}

// take returns the actions for every unavailable candidate, for every
// candidate whose update is live (staged ahead and decided Live without
// a drain), and for the other available candidates, in turn, while
// capacity lasts, and the blocked candidates it passed over on the way.
//
// A live update does not count against maxUnavailable when it is
// taken: the node stays Ready and schedulable. It counts against
// liveCapacity instead (maxUnavailable + stageAhead, less the nodes
// unavailable now), as every other taken node does: once taken, a node
// counts as unavailable while its daemon works, a moment for a live
// apply, and a live apply that fails falls back to a reboot, still
// unavailable. So at most maxUnavailable + stageAhead nodes are ever
// unavailable, and no more live updates are taken while the failed
// ones reboot; only a node asked to stage ahead decides ahead.
//
// With a topology (budget not nil), a node that costs capacity also
// costs its group's: it is taken only while both last. A held node is
// passed over and costs nothing.
func take(candidates []candidate, capacity, liveCapacity int, config string, budget groupBudget) ([]Action, []string) {
	slices.SortFunc(candidates, byTurn)
	var actions []Action
	var blocked []string
	for _, c := range candidates {
		if c.node.Hold != "" {
			continue
		}
		live := !c.unavailable && liveCapacity > 0 && c.live(config)
		free := c.unavailable || live
		groupFull := budget != nil && budget[c.node.Group] <= 0
		if c.node.Blocked {
			if free || (capacity > 0 && !groupFull) {
				blocked = append(blocked, c.node.Name)
			}
			continue
		}
		switch {
		case live:
			liveCapacity--
		case !free:
			if capacity <= 0 || groupFull {
				continue
			}
			capacity--
			liveCapacity--
			if budget != nil {
				budget[c.node.Group]--
			}
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

// stageAhead picks the nodes asked to download their image ahead: the
// first n available candidates in turn that are not taken and whose
// image is not the one they run (a config-only change downloads
// nothing).
func stageAhead(candidates []candidate, taken []Action, n int) []Action {
	slices.SortFunc(candidates, byTurn)
	var out []Action
	for _, c := range candidates {
		if len(out) == n {
			break
		}
		if c.unavailable || c.image == c.node.CurrentImage || c.node.Hold != "" ||
			slices.ContainsFunc(taken, func(a Action) bool { return a.Node == c.node.Name }) {
			continue
		}
		out = append(out, Action{Node: c.node.Name, Image: c.image})
	}
	slices.SortFunc(out, func(a, b Action) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// unavailable reports whether n cannot be counted on to run workloads: not
// Ready, cordoned, or its daemon is updating it, failed, or has not yet
// caught up with what it was sent.
func unavailable(n *Node) bool {
	switch n.State {
	case v1alpha1.NodeStateWorking, v1alpha1.NodeStateRebooting, v1alpha1.NodeStateDegraded:
		return true
	}
	return !n.Ready || n.Cordoned || pending(n)
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
