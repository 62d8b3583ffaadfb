package plan

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

var update = flag.Bool("update", false, "rewrite the golden rollout sequences under testdata")

// simNode is a node with the memory its daemon keeps in its state file.
type simNode struct {
	Node
	// failedPair is the desired pair this node failed: its daemon never
	// tries the same pair twice.
	failedPair [2]string
}

// event is something the world does to the pool at the start of a tick.
type event struct {
	say string
	do  func(s *sim)
}

type scenario struct {
	name   string
	about  string
	pool   Pool
	target Target
	nodes  []Node
	// failing maps a node to the image that fails its health check there.
	failing map[string]string
	events  map[int][]event
	// short names configs and images in the golden file.
	short map[string]string
}

// sim plays a rollout: each tick it plans, writes the actions as the
// controller would, records the tick, and moves every node's daemon one
// step. A NotReady node's daemon does not move.
type sim struct {
	t      *testing.T
	sc     scenario
	target Target
	nodes  []simNode
	out    bytes.Buffer
	// soakStart and soakTarget are the soak the controller recorded in
	// the pool's status, and for which target.
	soakStart  time.Time
	soakTarget Target
	// stepSoak is the step soak the controller recorded: its step, start
	// and target.
	stepSoakStep   int
	stepSoakStart  time.Time
	stepSoakTarget Target
	// pulls are the downloads the daemons started this tick: "ahead"
	// (stage ahead) or "update" (an update without its image staged).
	pulls []string
}

// tickTime is the sim's clock: tick n is n minutes after start.
var start = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func tickTime(tick int) time.Time { return start.Add(time.Duration(tick) * time.Minute) }

func (s *sim) node(name string) *simNode {
	for i := range s.nodes {
		if s.nodes[i].Name == name {
			return &s.nodes[i]
		}
	}
	s.t.Fatalf("no node %s", name)
	return nil
}

func (s *sim) plain() []Node {
	out := make([]Node, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n.Node
	}
	return out
}

func (s *sim) short(v string) string {
	if v == "" {
		return "-"
	}
	if name, ok := s.sc.short[v]; ok {
		return name
	}
	return v
}

// step is one move of n's daemon: desired set → Working → Rebooting →
// Done with current = desired, or Degraded when the image fails its health
// check (the daemon rolls back, so current stays). Only the config
// changed: Working → Done, no reboot.
func (s *sim) step(n *simNode) {
	if !n.Ready || n.DrainBlocked {
		// A quarantined node's daemon waits for its drain.
		return
	}
	desired := [2]string{n.DesiredConfig, n.DesiredImage}
	switch n.State {
	case done, degraded:
		if n.State == degraded && desired == n.failedPair {
			return
		}
		if n.State == done && n.DesiredConfig == n.CurrentConfig && n.DesiredImage == n.CurrentImage {
			// Idle: the daemon stages ahead what it is asked to, locked,
			// and drops a stage it is no longer asked for.
			switch {
			case n.DesiredStage != "" && n.StagedImage != n.DesiredStage:
				n.StagedImage = n.DesiredStage
				s.pulls = append(s.pulls, n.Name+"(ahead)")
			case n.DesiredStage == "":
				n.StagedImage = ""
			}
			return
		}
		n.State, n.Reason = working, ""
		if n.DesiredImage != n.CurrentImage {
			// The update stages its image now, unless it was staged
			// ahead: then there is nothing to download.
			if n.StagedImage != n.DesiredImage {
				s.pulls = append(s.pulls, n.Name+"(update)")
			}
			n.StagedImage = ""
		}
	case working:
		if n.DesiredImage == n.CurrentImage {
			n.CurrentConfig, n.State = n.DesiredConfig, done
			return
		}
		n.State = rebooting
	case rebooting:
		if img, ok := s.sc.failing[n.Name]; ok && img == n.DesiredImage {
			n.State = degraded
			n.Reason = fmt.Sprintf("image %s failed its health check; rolled back to %s", s.short(n.DesiredImage), s.short(n.CurrentImage))
			n.failedPair = desired
			return
		}
		n.CurrentConfig, n.CurrentImage, n.State = n.DesiredConfig, n.DesiredImage, done
	}
}

func (s *sim) record(tick int, r Result) {
	var took []string
	for _, a := range r.Actions {
		took = append(took, a.Node)
	}
	var flags []string
	for _, f := range []struct {
		on   bool
		name string
	}{{r.Updated, "updated"}, {r.Updating, "updating"}, {r.Halted, "halted"}} {
		if f.on {
			flags = append(flags, f.name)
		}
	}
	fmt.Fprintf(&s.out, "tick %d take [%s] machines %d updated %d ready %d unavailable %d degraded %d failed %d pending %d max %d [%s]",
		tick, strings.Join(took, " "), r.MachineCount, r.UpdatedCount, r.ReadyCount, r.UnavailableCount,
		r.DegradedCount, r.FailedCount, r.PendingCount, r.MaxUnavailable, strings.Join(flags, " "))
	if s.sc.pool.StageAhead > 0 {
		var staging []string
		for _, a := range r.Stage {
			staging = append(staging, a.Node)
		}
		fmt.Fprintf(&s.out, " stage [%s] staged %d", strings.Join(staging, " "), r.StagedAheadCount)
	}
	if len(r.Groups) > 0 {
		var gs []string
		for _, g := range r.Groups {
			gs = append(gs, fmt.Sprintf("%s %d/%d unavail %d cap %d", groupName(g.Name), g.UpdatedCount, g.MachineCount, g.UnavailableCount, g.Capacity))
		}
		fmt.Fprintf(&s.out, " groups [%s]", strings.Join(gs, ", "))
		if r.ActiveGroup != "" {
			fmt.Fprintf(&s.out, " active %s", groupName(r.ActiveGroup))
		}
	}
	if st := r.Step; st != nil {
		fmt.Fprintf(&s.out, " step %d/%d %s sent %d/%d updated %d need %d", st.Index+1, st.Count, st.Phase, st.Sent, st.Size, st.Updated, st.Needed)
		if !st.SoakUntil.IsZero() {
			fmt.Fprintf(&s.out, " soak %s-%s", st.SoakStartedAt.Format("15:04"), st.SoakUntil.Format("15:04"))
		}
	}
	if len(r.Quarantined) > 0 {
		var q []string
		for _, h := range r.Quarantined {
			q = append(q, h.Node)
		}
		fmt.Fprintf(&s.out, " quarantined [%s]", strings.Join(q, " "))
		if r.QuarantineFull {
			s.out.WriteString(" (over maxBlockedNodes)")
		}
	}
	if len(r.Held) > 0 {
		var held []string
		for _, h := range r.Held {
			held = append(held, h.Node)
		}
		fmt.Fprintf(&s.out, " held [%s]", strings.Join(held, " "))
	}
	if c := r.Canary; c != nil {
		fmt.Fprintf(&s.out, " canary %s %d/%d", c.Phase, c.UpdatedCount, c.MachineCount)
		if !c.SoakUntil.IsZero() {
			fmt.Fprintf(&s.out, " soak %s-%s", c.SoakStartedAt.Format("15:04"), c.SoakUntil.Format("15:04"))
		}
	}
	s.out.WriteByte('\n')
	for _, n := range s.nodes {
		ready := "Ready"
		if !n.Ready {
			ready = "NotReady"
		}
		fmt.Fprintf(&s.out, "  %-4s %-8s %-9s cur %s/%s des %s/%s", n.Name, ready, n.State,
			s.short(n.CurrentConfig), s.short(n.CurrentImage), s.short(n.DesiredConfig), s.short(n.DesiredImage))
		if s.sc.pool.Topology != nil {
			fmt.Fprintf(&s.out, " zone %s", groupName(n.Group))
		}
		if n.Hold != "" {
			fmt.Fprintf(&s.out, " hold %q", n.Hold)
		}
		if n.DrainBlocked {
			s.out.WriteString(" drain-blocked")
		}
		if n.DesiredStage != "" {
			fmt.Fprintf(&s.out, " stage %s", s.short(n.DesiredStage))
		}
		if n.StagedImage != "" {
			fmt.Fprintf(&s.out, " staged %s", s.short(n.StagedImage))
		}
		if n.Reason != "" {
			fmt.Fprintf(&s.out, " %q", n.Reason)
		}
		s.out.WriteByte('\n')
	}
}

// plan plans at tick with the soak recorded for the current target, as
// the controller reads it back from the pool's status.
func (s *sim) plan(tick int) Result {
	pool := s.sc.pool
	pool.Now = tickTime(tick)
	if pool.Canary != nil {
		c := *pool.Canary
		c.SoakStartedAt = time.Time{}
		if s.soakTarget == s.target {
			c.SoakStartedAt = s.soakStart
		}
		pool.Canary = &c
	}
	if pool.Steps != nil {
		st := *pool.Steps
		st.SoakStep, st.SoakStartedAt = 0, time.Time{}
		if s.stepSoakTarget == s.target {
			st.SoakStep, st.SoakStartedAt = s.stepSoakStep, s.stepSoakStart
		}
		pool.Steps = &st
	}
	return Plan(pool, s.target, s.plain())
}

// apply writes a plan as the controller does: the desired pair of the
// nodes taken, the desiredStage of those in Stage (and of no other), and
// the soak's start into the status.
func (s *sim) apply(r Result) {
	for _, a := range r.Actions {
		n := s.node(a.Node)
		n.DesiredConfig, n.DesiredImage = a.Config, a.Image
	}
	for i := range s.nodes {
		n := &s.nodes[i]
		n.DesiredStage = ""
		for _, a := range r.Stage {
			if a.Node == n.Name {
				n.DesiredStage = a.Image
			}
		}
	}
	if c := r.Canary; c != nil && !c.SoakStartedAt.IsZero() {
		s.soakStart, s.soakTarget = c.SoakStartedAt, s.target
	}
	if st := r.Step; st != nil && !st.SoakStartedAt.IsZero() {
		s.stepSoakStep, s.stepSoakStart, s.stepSoakTarget = st.Index, st.SoakStartedAt, s.target
	}
}

const maxTicks = 60

// run plays the scenario until the pool is updated and no event is left,
// checking the planner's promises at every tick.
func (s *sim) run() {
	s.target = s.sc.target
	for _, n := range s.sc.nodes {
		s.nodes = append(s.nodes, simNode{Node: n})
	}
	lastEvent := 0
	for tick := range s.sc.events {
		lastEvent = max(lastEvent, tick)
	}
	fmt.Fprintf(&s.out, "# %s\n# Each tick: events, then the plan (its counts are of the nodes before its\n# actions), then the nodes after the actions; then each daemon moves a step.\n", s.sc.about)
	for tick := 1; tick <= maxTicks; tick++ {
		for _, e := range s.sc.events[tick] {
			e.do(s)
			fmt.Fprintf(&s.out, "tick %d event: %s\n", tick, e.say)
		}
		r := s.plan(tick)
		s.apply(r)
		after := s.plan(tick)
		// Quarantined nodes run their pods: they are not counted.
		if limit := max(int32(r.MaxUnavailable), r.UnavailableCount-r.QuarantinedCount); after.UnavailableCount-after.QuarantinedCount > limit {
			s.t.Errorf("tick %d: %d nodes unavailable after the actions, more than max(maxUnavailable %d, %d unavailable before)",
				tick, after.UnavailableCount-after.QuarantinedCount, r.MaxUnavailable, r.UnavailableCount-r.QuarantinedCount)
		}
		s.checkGroups(tick, r, after)
		if len(after.Actions) > 0 {
			s.t.Errorf("tick %d: planning again with nothing changed takes %v: the plan is not level-based", tick, after.Actions)
		}
		if fmt.Sprint(after.Stage) != fmt.Sprint(r.Stage) {
			s.t.Errorf("tick %d: planning again with nothing changed stages %v, before %v: the plan is not level-based", tick, after.Stage, r.Stage)
		}
		if len(r.Stage) > s.sc.pool.StageAhead {
			s.t.Errorf("tick %d: %d nodes asked to stage ahead, more than stageAhead %d", tick, len(r.Stage), s.sc.pool.StageAhead)
		}
		s.record(tick, r)
		if r.Updated && tick >= lastEvent {
			return
		}
		s.pulls = nil
		for i := range s.nodes {
			s.step(&s.nodes[i])
		}
		if s.sc.pool.StageAhead > 0 {
			fmt.Fprintf(&s.out, "  pulls [%s]\n", strings.Join(s.pulls, " "))
		}
		if limit := r.MaxUnavailable + s.sc.pool.StageAhead; len(s.pulls) > limit {
			s.t.Errorf("tick %d: %d downloads at once (%v), more than maxUnavailable + stageAhead = %d", tick, len(s.pulls), s.pulls, limit)
		}
	}
	s.t.Errorf("the pool is not updated after %d ticks", maxTicks)
}

// checkGroups holds the topology's promise: after the actions no group
// has more nodes unavailable than its budgets allow, unless it had as
// many before.
func (s *sim) checkGroups(tick int, before, after Result) {
	t := s.sc.pool.Topology
	if t == nil {
		return
	}
	was := map[string]GroupResult{}
	for _, g := range before.Groups {
		was[g.Name] = g
	}
	for _, g := range after.Groups {
		limit := int(g.MachineCount)
		if t.MaxUnavailable != nil {
			limit = maxUnavailable(t.MaxUnavailable, int(g.MachineCount))
		}
		if t.MinAvailable != nil {
			limit = min(limit, int(g.MachineCount)-minAvailable(t.MinAvailable, int(g.MachineCount)))
		}
		if n := int(g.UnavailableCount); n > max(limit, int(was[g.Name].UnavailableCount)) {
			s.t.Errorf("tick %d: group %s has %d nodes unavailable after the actions, over its budget of %d", tick, groupName(g.Name), n, limit)
		}
	}
	if t.Sequential {
		active := map[string]bool{}
		for _, n := range s.nodes {
			if updating(&n.Node) {
				active[n.Group] = true
			}
		}
		if len(active) > 1 {
			s.t.Errorf("tick %d: nodes of %d groups update at once in a sequential rollout", tick, len(active))
		}
	}
}

func groupName(g string) string {
	if g == "" {
		return "(none)"
	}
	return g
}

// inZones puts nodes in the named groups, in order.
func inZones(nodes []Node, zones ...string) []Node {
	for i := range nodes {
		nodes[i].Group = zones[i]
	}
	return nodes
}

func setDrainBlocked(name string, blocked bool) event {
	say := name + "'s drain passes"
	if blocked {
		say = name + "'s drain is blocked past drainTimeout: quarantined"
	}
	return event{say: say, do: func(s *sim) {
		n := s.node(name)
		n.DrainBlocked, n.DrainBlockedReason = blocked, ""
		if blocked {
			n.DrainBlockedReason = "pod app/db-0 (PodDisruptionBudget app/db)"
		}
	}}
}

func setHold(name, reason string) event {
	say := name + " released"
	if reason != "" {
		say = name + " held: " + reason
	}
	return event{say: say, do: func(s *sim) { s.node(name).Hold = reason }}
}

// workers makes n nodes w1..wn of pool worker, on c1/imgA, adopted (sent
// what they run), originally booted from imgOrig. Names are padded to one
// width so that name order (the planner's) reads as number order.
func workers(n int) []Node {
	nodes := make([]Node, n)
	width := len(fmt.Sprint(n))
	for i := range nodes {
		nodes[i] = nd(fmt.Sprintf("w%0*d", width, i+1))
	}
	return nodes
}

var shortNames = map[string]string{
	c1: "c1", c2: "c2", c3: "c3",
	imgOrig: "O", imgOrig2: "O2", imgA: "A", imgB: "B", imgC: "C",
}

func setReady(name string, ready bool) event {
	say := name + " NotReady"
	if ready {
		say = name + " Ready"
	}
	return event{say: say, do: func(s *sim) { s.node(name).Ready = ready }}
}

func setTarget(say string, t Target) event {
	return event{say: say, do: func(s *sim) { s.target = t }}
}

func setPaused(paused bool) event {
	say := "pool unpaused"
	if paused {
		say = "pool paused"
	}
	return event{say: say, do: func(s *sim) { s.sc.pool.Paused = paused }}
}

func setWindow(open bool) event {
	say := "maintenance window closes"
	if open {
		say = "maintenance window opens"
	}
	return event{say: say, do: func(s *sim) { s.sc.pool.OutsideWindow = !open }}
}

// inCanary marks the named nodes as selected by the pool's canary.
func inCanary(nodes []Node, names ...string) []Node {
	for i := range nodes {
		if slices.Contains(names, nodes[i].Name) {
			nodes[i].InCanary = true
		}
	}
	return nodes
}

func TestRolloutGolden(t *testing.T) {
	onOriginal := func(n int) []Node {
		nodes := workers(n)
		for i := range nodes {
			nodes[i] = nodes[i].on(c1, imgOrig)
		}
		nodes[0] = nodes[0].on(c1, imgOrig2).original(imgOrig2)
		return nodes
	}
	scenarios := []scenario{
		{
			name:   "max-unavailable-1",
			about:  "5 nodes, maxUnavailable 1 (default): c1/A to c2/B one node at a time.",
			pool:   Pool{Name: "worker"},
			target: tB,
			nodes:  workers(5),
		},
		{
			name:   "max-unavailable-2",
			about:  "5 nodes, maxUnavailable 2: c1/A to c2/B two nodes at a time.",
			pool:   Pool{Name: "worker", MaxUnavailable: num(2)},
			target: tB,
			nodes:  workers(5),
		},
		{
			name:   "percent-30",
			about:  "10 nodes, maxUnavailable 30% (3 nodes): c1/A to c2/B.",
			pool:   Pool{Name: "worker", MaxUnavailable: ptr(intstr.FromString("30%"))},
			target: tB,
			nodes:  workers(10),
		},
		{
			name: "halt-then-rollback",
			about: "5 nodes on their original images (w1 booted O2, the rest O), maxFailedNodes 1.\n" +
				"# Image B fails on w2: the rollout halts. Then the MachineOSConfig is deleted:\n" +
				"# the target is each node's original image, and the failed w2 is taken back too.",
			pool:    Pool{Name: "worker", MaxFailedNodes: 1},
			target:  Target{Config: c1, Image: imgB},
			nodes:   onOriginal(5),
			failing: map[string]string{"w2": imgB},
			events: map[int][]event{
				10: {setTarget("MachineOSConfig deleted: target c1 on each node's original image", Target{Config: c1})},
			},
		},
		{
			name: "halt-then-fix",
			about: "5 nodes, maxUnavailable 2, maxFailedNodes 1. Image B fails on w2: the rollout\n" +
				"# halts with w1 updated. A fixed image C restarts it and takes w2 again.",
			pool:    Pool{Name: "worker", MaxUnavailable: num(2), MaxFailedNodes: 1},
			target:  tB,
			nodes:   workers(5),
			failing: map[string]string{"w2": imgB},
			events: map[int][]event{
				8: {setTarget("new build: target c3/C", tC)},
			},
		},
		{
			name: "node-not-ready",
			about: "5 nodes, maxUnavailable 1. w4 goes NotReady before its turn: it is taken at\n" +
				"# once, for free, and waits; an updated w1 going NotReady holds the rollout.",
			pool:   Pool{Name: "worker"},
			target: tB,
			nodes:  workers(5),
			events: map[int][]event{
				2:  {setReady("w4", false)},
				6:  {setReady("w4", true)},
				9:  {setReady("w1", false)},
				12: {setReady("w1", true)},
			},
		},
		{
			name:   "paused-midway",
			about:  "4 nodes, maxUnavailable 1, paused while w2 updates: w2 finishes, nobody else starts.",
			pool:   Pool{Name: "worker"},
			target: tB,
			nodes:  workers(4),
			events: map[int][]event{
				5:  {setPaused(true)},
				10: {setPaused(false)},
			},
		},
		{
			name: "window-closes-midway",
			about: "6 nodes, maxUnavailable 2; the maintenance window closes while w1 and w2 update:\n" +
				"# they finish, nobody else starts until it opens again.",
			pool:   Pool{Name: "worker", MaxUnavailable: num(2)},
			target: tB,
			nodes:  workers(6),
			events: map[int][]event{
				2: {setWindow(false)},
				7: {setWindow(true)},
			},
		},
		{
			name: "stage-ahead-2",
			about: "6 nodes, maxUnavailable 1, stageAhead 2: the next two nodes download B ahead\n" +
				"# (locked) while one updates; a node's turn then downloads nothing, and at\n" +
				"# most maxUnavailable + stageAhead = 3 nodes download at once.",
			pool:   Pool{Name: "worker", StageAhead: 2},
			target: tB,
			nodes:  workers(6),
		},
		{
			name: "stage-ahead-window-closed",
			about: "4 nodes, maxUnavailable 1, stageAhead 2, outside the maintenance window:\n" +
				"# nobody is taken, but two nodes download B ahead; when the window opens\n" +
				"# their turns are drain and reboot only.",
			pool:   Pool{Name: "worker", StageAhead: 2, OutsideWindow: true},
			target: tB,
			nodes:  workers(4),
			events: map[int][]event{
				4: {setWindow(true)},
			},
		},
		{
			name: "canary-count-soak",
			about: "5 nodes, maxUnavailable 1, canary count 2 with a 3-minute soak (a tick is a\n" +
				"# minute): w1 and w2 update, the pool soaks, then the rest follows.",
			pool:   Pool{Name: "worker", Canary: &Canary{Count: 2, Soak: 3 * time.Minute}},
			target: tB,
			nodes:  workers(5),
		},
		{
			name: "canary-fails",
			about: "5 nodes, maxUnavailable 2, maxFailedNodes 3, canary count 2. B fails on w2:\n" +
				"# one failure in the canary halts, whatever maxFailedNodes says. A fixed C\n" +
				"# starts a new canary, w2 first.",
			pool:    Pool{Name: "worker", MaxUnavailable: num(2), MaxFailedNodes: 3, Canary: &Canary{Count: 2, Soak: 2 * time.Minute}},
			target:  tB,
			nodes:   workers(5),
			failing: map[string]string{"w2": imgB},
			events: map[int][]event{
				7: {setTarget("new build: target c3/C", tC)},
			},
		},
		{
			name: "canary-selector-stage-ahead",
			about: "6 nodes, maxUnavailable 1, stageAhead 1, the canary selected by label (w5,\n" +
				"# w6), 2-minute soak: the canary's second node stages while its first updates;\n" +
				"# during the soak w1, the first of the rest, stages, so it starts at once.",
			pool:   Pool{Name: "worker", StageAhead: 1, Canary: &Canary{BySelector: true, Soak: 2 * time.Minute}},
			target: tB,
			nodes:  inCanary(workers(6), "w5", "w6"),
		},
		{
			name: "topology-zones",
			about: "6 nodes in zones a, b, c; maxUnavailable 3, at most 1 unavailable per zone:\n" +
				"# one node of each zone at a time.",
			pool:   Pool{Name: "worker", MaxUnavailable: num(3), Topology: &Topology{MaxUnavailable: num(1)}},
			target: tB,
			nodes:  inZones(workers(6), "a", "a", "b", "b", "c", "c"),
		},
		{
			name: "topology-failure-settles",
			about: "4 nodes in zones a, b; maxUnavailable 2, 1 per zone, maxFailedNodes 3. B fails on w1,\n" +
				"# which rolls back and is Ready: settled, it no longer uses up zone a, so w2 follows.",
			pool:    Pool{Name: "worker", MaxUnavailable: num(2), MaxFailedNodes: 3, Topology: &Topology{MaxUnavailable: num(1)}},
			target:  tB,
			nodes:   inZones(workers(4), "a", "a", "b", "b"),
			failing: map[string]string{"w1": imgB},
			events: map[int][]event{
				9: {setTarget("new build: target c3/C", tC)},
			},
		},
		{
			name: "topology-sequential",
			about: "6 nodes in zones a, b, c; maxUnavailable 2, one zone after another, c first:\n" +
				"# c, then a, then b (by name); the pool-wide maxUnavailable holds within a zone.",
			pool:   Pool{Name: "worker", MaxUnavailable: num(2), Topology: &Topology{Sequential: true, Order: []string{"c"}}},
			target: tB,
			nodes:  inZones(workers(6), "a", "a", "b", "b", "c", "c"),
		},
		{
			name: "topology-min-available",
			about: "4 nodes in zone a, 2 in b, 1 without the label; maxUnavailable 4, minAvailable 50% per\n" +
				"# zone: 2 of a and 1 of b at a time; the unlabelled node is a group of its own,\n" +
				"# which can always give up its one node (minAvailable is at most the size less one).",
			pool:   Pool{Name: "worker", MaxUnavailable: num(4), Topology: &Topology{MinAvailable: ptr(intstr.FromString("50%"))}},
			target: tB,
			nodes:  inZones(workers(7), "a", "a", "a", "a", "b", "b", ""),
		},
		{
			name: "hold-one-node",
			about: "4 nodes, maxUnavailable 2; an admin holds w2 (disk replacement): it is skipped and\n" +
				"# reported, the others update, and w2 follows once released.",
			pool:   Pool{Name: "worker", MaxUnavailable: num(2)},
			target: tB,
			nodes: func() []Node {
				n := workers(4)
				n[1].Hold = "disk replacement"
				return n
			}(),
			events: map[int][]event{
				8: {setHold("w2", "")},
			},
		},
		{
			name: "drain-blocked-quarantine",
			about: "5 nodes, maxUnavailable 1, undrainableNodeBehavior Quarantine, maxBlockedNodes 1.\n" +
				"# w1's drain is blocked: it is quarantined and w2 goes on. w2's is blocked too: two\n" +
				"# are over maxBlockedNodes, and nothing more is taken until w1's drain passes.",
			pool:   Pool{Name: "worker", MaxBlockedNodes: 1},
			target: tB,
			nodes:  workers(5),
			events: map[int][]event{
				2:  {setDrainBlocked("w1", true)},
				4:  {setDrainBlocked("w2", true)},
				8:  {setDrainBlocked("w1", false)},
				12: {setDrainBlocked("w2", false)},
			},
		},
		{
			name: "steps-1-40-100",
			about: "5 nodes, maxUnavailable 2, steps 1 / 40% / 100%, each soaked 2 minutes (a tick\n" +
				"# is a minute), threshold 100%: w1, soak, w2, soak, then the rest two at a time.",
			pool: Pool{Name: "worker", MaxUnavailable: num(2), Steps: &Steps{Steps: []Step{
				{Size: num(1), Soak: 2 * time.Minute},
				{Size: ptr(intstr.FromString("40%")), Soak: 2 * time.Minute},
				{Size: ptr(intstr.FromString("100%"))},
			}}},
			target: tB,
			nodes:  workers(5),
		},
		{
			name: "steps-threshold-fails",
			about: "6 nodes, maxUnavailable 2, maxFailedNodes 3, steps 2 / 100%, threshold 60%: B fails\n" +
				"# on w1, so 1 of the step's 2 nodes runs it, under 60%: the rollout halts at the step.\n" +
				"# A fixed C restarts it from the first step.",
			pool: Pool{Name: "worker", MaxUnavailable: num(2), MaxFailedNodes: 3, Steps: &Steps{
				Steps:            []Step{{Size: num(2)}, {Size: ptr(intstr.FromString("100%"))}},
				SuccessThreshold: ptr(intstr.FromString("60%")),
			}},
			target:  tB,
			nodes:   workers(6),
			failing: map[string]string{"w1": imgB},
			events: map[int][]event{
				7: {setTarget("new build: target c3/C", tC)},
			},
		},
		{
			name:   "waiting-for-build",
			about:  "3 nodes; a config change needs a new image: nothing moves until the build is done.",
			pool:   Pool{Name: "worker", MaxUnavailable: num(3)},
			target: Target{Config: c1, Image: imgA, Waiting: "build worker-b is running"},
			nodes:  workers(3),
			events: map[int][]event{
				3: {setTarget("build done: target c2/B", tB)},
			},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if sc.short == nil {
				sc.short = shortNames
			}
			s := &sim{t: t, sc: sc}
			s.run()
			golden := filepath.Join("testdata", sc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, s.out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got := s.out.String(); got != string(want) {
				t.Errorf("rollout differs from %s (run with -update to accept):\n%s", golden, firstDiff(got, string(want)))
			}
		})
	}
}

// firstDiff shows the first line that differs, with the tick it belongs
// to, so that a failure points at the step that changed.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	tick := ""
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if strings.HasPrefix(wl, "tick ") {
			tick = wl
		}
		if gl != wl {
			return fmt.Sprintf("line %d (in %q):\n got: %s\nwant: %s", i+1, tick, gl, wl)
		}
	}
	return "(no line differs)"
}
