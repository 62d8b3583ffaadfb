package plan

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
}

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
	if !n.Ready {
		return
	}
	desired := [2]string{n.DesiredConfig, n.DesiredImage}
	switch n.State {
	case done, degraded:
		if n.State == degraded && desired == n.failedPair {
			return
		}
		if n.State == done && n.DesiredConfig == n.CurrentConfig && n.DesiredImage == n.CurrentImage {
			return
		}
		n.State, n.Reason = working, ""
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
	fmt.Fprintf(&s.out, "tick %d take [%s] machines %d updated %d ready %d unavailable %d degraded %d failed %d pending %d max %d [%s]\n",
		tick, strings.Join(took, " "), r.MachineCount, r.UpdatedCount, r.ReadyCount, r.UnavailableCount,
		r.DegradedCount, r.FailedCount, r.PendingCount, r.MaxUnavailable, strings.Join(flags, " "))
	for _, n := range s.nodes {
		ready := "Ready"
		if !n.Ready {
			ready = "NotReady"
		}
		fmt.Fprintf(&s.out, "  %-4s %-8s %-9s cur %s/%s des %s/%s", n.Name, ready, n.State,
			s.short(n.CurrentConfig), s.short(n.CurrentImage), s.short(n.DesiredConfig), s.short(n.DesiredImage))
		if n.Reason != "" {
			fmt.Fprintf(&s.out, " %q", n.Reason)
		}
		s.out.WriteByte('\n')
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
		r := Plan(s.sc.pool, s.target, s.plain())
		for _, a := range r.Actions {
			n := s.node(a.Node)
			n.DesiredConfig, n.DesiredImage = a.Config, a.Image
		}
		after := Plan(s.sc.pool, s.target, s.plain())
		if limit := max(int32(r.MaxUnavailable), r.UnavailableCount); after.UnavailableCount > limit {
			s.t.Errorf("tick %d: %d nodes unavailable after the actions, more than max(maxUnavailable %d, %d unavailable before)",
				tick, after.UnavailableCount, r.MaxUnavailable, r.UnavailableCount)
		}
		if len(after.Actions) > 0 {
			s.t.Errorf("tick %d: planning again with nothing changed takes %v: the plan is not level-based", tick, after.Actions)
		}
		s.record(tick, r)
		if r.Updated && tick >= lastEvent {
			return
		}
		for i := range s.nodes {
			s.step(&s.nodes[i])
		}
	}
	s.t.Errorf("the pool is not updated after %d ticks", maxTicks)
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
