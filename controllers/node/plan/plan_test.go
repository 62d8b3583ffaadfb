package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/strata-dev/strata/api/v1alpha1"
)

const (
	c1 = "rendered-worker-1"
	c2 = "rendered-worker-2"
	c3 = "rendered-worker-3"

	imgOrig  = "registry.example.com/fedora-bootc@sha256:0000"
	imgOrig2 = "registry.example.com/centos-bootc@sha256:0002"
	imgA     = "registry.example.com/strata/worker@sha256:aaaa"
	imgB     = "registry.example.com/strata/worker@sha256:bbbb"
	imgC     = "registry.example.com/strata/worker@sha256:cccc"

	done      = v1alpha1.NodeStateDone
	working   = v1alpha1.NodeStateWorking
	rebooting = v1alpha1.NodeStateRebooting
	degraded  = v1alpha1.NodeStateDegraded
)

var (
	tA = Target{Config: c1, Image: imgA}
	tB = Target{Config: c2, Image: imgB}
	tC = Target{Config: c3, Image: imgC}
)

// nd is a Ready node of pool worker that runs and was sent c1/imgA and
// booted imgOrig before Strata.
func nd(name string) Node {
	return Node{
		Name: name, Ready: true, Pools: []string{"worker"},
		CurrentConfig: c1, CurrentImage: imgA, DesiredConfig: c1, DesiredImage: imgA,
		OriginalImage: imgOrig, State: done,
	}
}

func (n Node) on(config, image string) Node {
	n.CurrentConfig, n.CurrentImage, n.DesiredConfig, n.DesiredImage = config, image, config, image
	return n
}

func (n Node) sent(config, image string) Node {
	n.DesiredConfig, n.DesiredImage = config, image
	return n
}

func (n Node) in(state string) Node {
	n.State = state
	return n
}

func (n Node) failed(reason string) Node {
	n.State, n.Reason = degraded, reason
	return n
}

func (n Node) notReady() Node {
	n.Ready = false
	return n
}

func (n Node) pools(p ...string) Node {
	n.Pools = p
	return n
}

func (n Node) blocked() Node {
	n.Blocked = true
	return n
}

func (n Node) original(image string) Node {
	n.OriginalImage = image
	return n
}

func ptr[T any](v T) *T { return &v }

func pct(s string) *intstr.IntOrString { return ptr(intstr.FromString(s)) }

func num(i int32) *intstr.IntOrString { return ptr(intstr.FromInt32(i)) }

// diffResult names the fields of got that differ from want, so that a
// failing case says what went wrong and not only that something did.
func diffResult(got, want Result) string {
	var b strings.Builder
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		if !reflect.DeepEqual(g, w) {
			fmt.Fprintf(&b, "\n  %s: got %+v, want %+v", gv.Type().Field(i).Name, g, w)
		}
	}
	return b.String()
}

var worker = Pool{Name: "worker"}

func TestPlan(t *testing.T) {
	halting := Pool{Name: "worker", MaxFailedNodes: 1}
	cases := []struct {
		name   string
		pool   Pool
		target Target
		nodes  []Node
		want   Result
	}{
		{
			name:   "every node on the target: updated, nothing to do",
			pool:   worker,
			target: tA,
			nodes:  []Node{nd("w1"), nd("w2"), nd("w3")},
			want:   Result{MaxUnavailable: 1, MachineCount: 3, UpdatedCount: 3, ReadyCount: 3, Updated: true},
		},
		{
			name:   "a pool without nodes is updated",
			pool:   worker,
			target: tA,
			want:   Result{MaxUnavailable: 1, Updated: true},
		},
		{
			name:   "new target: first node by name, one at a time, whatever the input order",
			pool:   worker,
			target: tB,
			nodes:  []Node{nd("w3"), nd("w1"), nd("w2")},
			want: Result{
				Actions:        []Action{{Node: "w1", Config: c2, Image: imgB}},
				MaxUnavailable: 1, MachineCount: 3, PendingCount: 2, Updating: true,
			},
		},
		{
			name:   "config-only change keeps the image",
			pool:   Pool{Name: "worker", MaxUnavailable: num(5)},
			target: Target{Config: c2, Image: imgA},
			nodes:  []Node{nd("w1"), nd("w2")},
			want: Result{
				Actions:        []Action{{Node: "w1", Config: c2, Image: imgA}, {Node: "w2", Config: c2, Image: imgA}},
				MaxUnavailable: 5, MachineCount: 2, Updating: true,
			},
		},
		{
			name:   "ready count counts only updated nodes that are Ready",
			pool:   worker,
			target: tA,
			nodes: []Node{
				nd("w1"),
				nd("w2").notReady(),
				nd("w3").on(c1, imgOrig).sent(c1, imgA).in(working),
			},
			want: Result{MaxUnavailable: 1, MachineCount: 3, UpdatedCount: 2, ReadyCount: 1, UnavailableCount: 2, Updating: true},
		},
		{
			name:   "a node already sent the target is not taken again",
			pool:   worker,
			target: tB,
			nodes:  []Node{nd("w1").sent(c2, imgB), nd("w2")},
			want:   Result{MaxUnavailable: 1, MachineCount: 2, UnavailableCount: 1, PendingCount: 1, Updating: true},
		},
		{
			name:   "a node in flight uses capacity",
			pool:   Pool{Name: "worker", MaxUnavailable: num(2)},
			target: tB,
			nodes:  []Node{nd("w1").sent(c2, imgB).in(rebooting), nd("w2"), nd("w3"), nd("w4")},
			want: Result{
				Actions:        []Action{{Node: "w2", Config: c2, Image: imgB}},
				MaxUnavailable: 2, MachineCount: 4, UnavailableCount: 1, PendingCount: 2, Updating: true,
			},
		},
		{
			name:   "unavailable candidates are taken first and for free; capacity below zero takes no available node",
			pool:   worker,
			target: tB,
			nodes: []Node{
				nd("a"),
				nd("b").notReady(),
				nd("c").on(c1, imgOrig).sent(c1, imgA).failed("image A failed"),
				nd("d"),
			},
			want: Result{
				Actions:        []Action{{Node: "b", Config: c2, Image: imgB}, {Node: "c", Config: c2, Image: imgB}},
				MaxUnavailable: 1, MachineCount: 4, UnavailableCount: 2, DegradedCount: 1, PendingCount: 2, Updating: true,
				Degraded: []NodeProblem{{Node: "c", Reason: "image A failed"}},
			},
		},
		{
			name:   "unavailable candidates do not consume what capacity is left",
			pool:   Pool{Name: "worker", MaxUnavailable: num(3)},
			target: tB,
			nodes: []Node{
				nd("d"),
				nd("c").on(c1, imgOrig).sent(c1, imgA).failed("image A failed"),
				nd("b").notReady(),
				nd("a"),
			},
			want: Result{
				Actions: []Action{
					{Node: "a", Config: c2, Image: imgB},
					{Node: "b", Config: c2, Image: imgB},
					{Node: "c", Config: c2, Image: imgB},
				},
				MaxUnavailable: 3, MachineCount: 4, UnavailableCount: 2, DegradedCount: 1, PendingCount: 1, Updating: true,
				Degraded: []NodeProblem{{Node: "c", Reason: "image A failed"}},
			},
		},
		{
			name:   "an updated NotReady node uses the capacity: nothing taken, nothing updating",
			pool:   worker,
			target: tB,
			nodes:  []Node{nd("w1").on(c2, imgB).notReady(), nd("w2")},
			want:   Result{MaxUnavailable: 1, MachineCount: 2, UpdatedCount: 1, UnavailableCount: 1, PendingCount: 1},
		},
		{
			name:   "paused: no action and not updating, even with a node in flight",
			pool:   Pool{Name: "worker", Paused: true},
			target: tB,
			nodes:  []Node{nd("w1").sent(c2, imgB).in(working), nd("w2"), nd("w3")},
			want:   Result{MaxUnavailable: 1, MachineCount: 3, UnavailableCount: 1, PendingCount: 2},
		},
		{
			name:   "outside the maintenance window: no action, the node in flight keeps the pool updating",
			pool:   Pool{Name: "worker", MaxUnavailable: num(3), OutsideWindow: true},
			target: tB,
			nodes:  []Node{nd("w1").sent(c2, imgB).in(working), nd("w2"), nd("w3").notReady()},
			want:   Result{MaxUnavailable: 3, MachineCount: 3, UnavailableCount: 2, PendingCount: 2, Updating: true},
		},
		{
			name:   "outside the maintenance window, nothing in flight: not updating",
			pool:   Pool{Name: "worker", OutsideWindow: true},
			target: tB,
			nodes:  []Node{nd("w1"), nd("w2")},
			want:   Result{MaxUnavailable: 1, MachineCount: 2, PendingCount: 2},
		},
		{
			name:   "held by a gate: no action, the node in flight keeps the pool updating",
			pool:   Pool{Name: "worker", MaxUnavailable: num(3), Held: true},
			target: tB,
			nodes:  []Node{nd("w1").sent(c2, imgB).in(working), nd("w2"), nd("w3").notReady()},
			want:   Result{MaxUnavailable: 3, MachineCount: 3, UnavailableCount: 2, PendingCount: 2, Updating: true},
		},
		{
			name:   "a blocked node is passed over and the next one taken in its place",
			pool:   worker,
			target: tB,
			nodes:  []Node{nd("w1").blocked(), nd("w2"), nd("w3")},
			want: Result{
				Actions:        []Action{{Node: "w2", Config: c2, Image: imgB}},
				MaxUnavailable: 1, MachineCount: 3, PendingCount: 2, Updating: true, Blocked: []string{"w1"},
			},
		},
		{
			name:   "a blocked unavailable node is not taken either (and being unavailable, it still counts)",
			pool:   worker,
			target: tB,
			nodes:  []Node{nd("w1").notReady().blocked(), nd("w2")},
			want: Result{
				MaxUnavailable: 1, MachineCount: 2, UnavailableCount: 1, PendingCount: 2, Blocked: []string{"w1"},
			},
		},
		{
			name:   "every candidate blocked: nothing taken, not updating",
			pool:   Pool{Name: "worker", MaxUnavailable: num(2)},
			target: tB,
			nodes:  []Node{nd("w1").blocked(), nd("w2").blocked(), nd("w3").on(c2, imgB)},
			want: Result{
				MaxUnavailable: 2, MachineCount: 3, UpdatedCount: 1, ReadyCount: 1, PendingCount: 2, Blocked: []string{"w1", "w2"},
			},
		},
		{
			name:   "waiting for a build: no action, not updated, counts against the given pair",
			pool:   worker,
			target: Target{Config: c1, Image: imgA, Waiting: "build worker-2 is running"},
			nodes:  []Node{nd("w1"), nd("w2")},
			want:   Result{MaxUnavailable: 1, MachineCount: 2, UpdatedCount: 2, ReadyCount: 2},
		},
		{
			name:   "waiting: a node still in flight keeps the pool updating",
			pool:   worker,
			target: Target{Config: c2, Image: imgB, Waiting: "build worker-3 is running"},
			nodes:  []Node{nd("w1").on(c2, imgB), nd("w2").sent(c2, imgB).in(working), nd("w3")},
			want:   Result{MaxUnavailable: 1, MachineCount: 3, UpdatedCount: 1, ReadyCount: 1, UnavailableCount: 1, PendingCount: 1, Updating: true},
		},
		{
			name:   "no rendered config yet: nothing taken, nothing updated",
			pool:   worker,
			target: Target{},
			nodes:  []Node{nd("w1"), nd("w2")},
			want:   Result{MaxUnavailable: 1, MachineCount: 2},
		},
		{
			name:   "one failure of the target halts at maxFailedNodes 1",
			pool:   halting,
			target: tB,
			nodes: []Node{
				nd("w1").sent(c2, imgB).failed("image B failed its health check; rolled back to A"),
				nd("w2"), nd("w3"),
			},
			want: Result{
				MaxUnavailable: 1, MachineCount: 3, UnavailableCount: 1, DegradedCount: 1, FailedCount: 1, PendingCount: 2, Halted: true,
				Degraded: []NodeProblem{{Node: "w1", Reason: "image B failed its health check; rolled back to A"}},
			},
		},
		{
			name:   "maxFailedNodes below 1 means 1",
			pool:   Pool{Name: "worker", MaxFailedNodes: -3, MaxUnavailable: num(2)},
			target: tB,
			nodes:  []Node{nd("w1").sent(c2, imgB).failed("boom"), nd("w2"), nd("w3")},
			want: Result{
				MaxUnavailable: 2, MachineCount: 3, UnavailableCount: 1, DegradedCount: 1, FailedCount: 1, PendingCount: 2, Halted: true,
				Degraded: []NodeProblem{{Node: "w1", Reason: "boom"}},
			},
		},
		{
			name:   "below maxFailedNodes the rollout goes on, and the failed node is not retried",
			pool:   Pool{Name: "worker", MaxFailedNodes: 2, MaxUnavailable: num(2)},
			target: tB,
			nodes:  []Node{nd("w1").sent(c2, imgB).failed("boom"), nd("w2"), nd("w3")},
			want: Result{
				Actions:        []Action{{Node: "w2", Config: c2, Image: imgB}},
				MaxUnavailable: 2, MachineCount: 3, UnavailableCount: 1, DegradedCount: 1, FailedCount: 1, PendingCount: 1, Updating: true,
				Degraded: []NodeProblem{{Node: "w1", Reason: "boom"}},
			},
		},
		{
			name:   "a new target restarts a halted rollout and retakes the failed node for free",
			pool:   halting,
			target: tC,
			nodes:  []Node{nd("w1").sent(c2, imgB).failed("boom"), nd("w2"), nd("w3")},
			want: Result{
				Actions:        []Action{{Node: "w1", Config: c3, Image: imgC}},
				MaxUnavailable: 1, MachineCount: 3, UnavailableCount: 1, DegradedCount: 1, PendingCount: 2, Updating: true,
				Degraded: []NodeProblem{{Node: "w1", Reason: "boom"}},
			},
		},
		{
			name:   "rollback: no image means each node's own original image",
			pool:   Pool{Name: "worker", MaxUnavailable: num(2), MaxFailedNodes: 1},
			target: Target{Config: c1},
			nodes: []Node{
				nd("w0").on(c1, imgOrig2).original(imgOrig2),
				nd("w1").on(c1, imgB).original(imgOrig2),
				nd("w2").on(c1, imgB),
				nd("w3").on(c1, imgOrig).sent(c1, imgB).failed("boom"),
			},
			want: Result{
				Actions:        []Action{{Node: "w1", Config: c1, Image: imgOrig2}, {Node: "w3", Config: c1, Image: imgOrig}},
				MaxUnavailable: 2, MachineCount: 4, UpdatedCount: 1, ReadyCount: 1, UnavailableCount: 1, DegradedCount: 1, PendingCount: 1, Updating: true,
				Degraded: []NodeProblem{{Node: "w3", Reason: "boom"}},
			},
		},
		{
			name:   "rollback waits for a node's daemon to record its original image",
			pool:   Pool{Name: "worker", MaxUnavailable: num(3)},
			target: Target{Config: c1},
			nodes: []Node{
				nd("w3").on(c1, imgB).original("").notReady(),
				nd("w1").on(c1, imgB).original(""),
				nd("w2").on(c1, imgB),
			},
			want: Result{
				Actions:        []Action{{Node: "w2", Config: c1, Image: imgOrig}},
				MaxUnavailable: 3, MachineCount: 3, UnavailableCount: 1, Updating: true,
				WaitingForDaemon: []string{"w1", "w3"},
			},
		},
		{
			name:   "a pool image does not need the original image",
			pool:   worker,
			target: tB,
			nodes:  []Node{nd("w1").original("")},
			want: Result{
				Actions:        []Action{{Node: "w1", Config: c2, Image: imgB}},
				MaxUnavailable: 1, MachineCount: 1, Updating: true,
			},
		},
		{
			name:   "nodes in several pools: reported, not counted, not taken, not using capacity",
			pool:   worker,
			target: tB,
			nodes: []Node{
				nd("w2").pools("worker", "gpu"),
				nd("w1").pools("worker", "infra").notReady().failed("boom"),
				nd("w3"), nd("w4"),
			},
			want: Result{
				Actions:        []Action{{Node: "w3", Config: c2, Image: imgB}},
				MaxUnavailable: 1, MachineCount: 2, PendingCount: 1, Updating: true,
				Conflicts: []string{"w1", "w2"},
			},
		},
		{
			name:   "a node in conflict does not keep the pool from being updated",
			pool:   worker,
			target: tA,
			nodes:  []Node{nd("w1"), nd("w2").pools("worker", "infra").on(c3, imgC)},
			want:   Result{MaxUnavailable: 1, MachineCount: 1, UpdatedCount: 1, ReadyCount: 1, Updated: true, Conflicts: []string{"w2"}},
		},
		{
			name:   "only several pools are a conflict: an empty Pools is still the caller's node",
			pool:   worker,
			target: tA,
			nodes:  []Node{nd("w1").pools()},
			want:   Result{MaxUnavailable: 1, MachineCount: 1, UpdatedCount: 1, ReadyCount: 1, Updated: true},
		},
		{
			name:   "degraded nodes listed by name with their reasons, Ready or not",
			pool:   Pool{Name: "worker", MaxFailedNodes: 5},
			target: tB,
			nodes: []Node{
				nd("z").sent(c2, imgB).failed("z failed"),
				nd("a").sent(c2, imgB).failed("a failed").notReady(),
				nd("m").on(c2, imgB),
			},
			want: Result{
				MaxUnavailable: 1, MachineCount: 3, UpdatedCount: 1, ReadyCount: 1, UnavailableCount: 2, DegradedCount: 2, FailedCount: 2,
				Degraded: []NodeProblem{{Node: "a", Reason: "a failed"}, {Node: "z", Reason: "z failed"}},
			},
		},
		{
			name:   "percent of the pool's nodes, not counting conflicts: 50% of 4",
			pool:   Pool{Name: "worker", MaxUnavailable: pct("50%")},
			target: tB,
			nodes: []Node{
				nd("w1"), nd("w2"), nd("w3"), nd("w4"),
				nd("x1").pools("worker", "infra"), nd("x2").pools("worker", "infra"),
			},
			want: Result{
				Actions:        []Action{{Node: "w1", Config: c2, Image: imgB}, {Node: "w2", Config: c2, Image: imgB}},
				MaxUnavailable: 2, MachineCount: 4, PendingCount: 2, Updating: true,
				Conflicts: []string{"x1", "x2"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(tc.pool, tc.target, tc.nodes)
			if d := diffResult(got, tc.want); d != "" {
				t.Errorf("Plan:%s", d)
			}
		})
	}
}

// TestUpdatedNeedsEveryField changes one thing at a time on an updated
// node: each must make it not updated.
func TestUpdatedNeedsEveryField(t *testing.T) {
	base := nd("w1").on(c2, imgB)
	if r := Plan(worker, tB, []Node{base}); r.UpdatedCount != 1 || !r.Updated || r.ReadyCount != 1 {
		t.Fatalf("baseline: %+v", r)
	}
	cases := map[string]Node{
		"current image differs":  func() Node { n := base; n.CurrentImage = imgA; return n }(),
		"desired image differs":  func() Node { n := base; n.DesiredImage = imgA; return n }(),
		"current config differs": func() Node { n := base; n.CurrentConfig = c1; return n }(),
		"desired config differs": func() Node { n := base; n.DesiredConfig = c1; return n }(),
		"both on another pair":   base.on(c1, imgA),
		"state Working":          base.in(working),
		"state Rebooting":        base.in(rebooting),
		"state Degraded":         base.in(degraded),
		"no state reported":      base.in(""),
	}
	for name, n := range cases {
		t.Run(name, func(t *testing.T) {
			r := Plan(worker, tB, []Node{n})
			if r.UpdatedCount != 0 || r.ReadyCount != 0 || r.Updated {
				t.Errorf("updated %d ready %d Updated %v, want 0 0 false", r.UpdatedCount, r.ReadyCount, r.Updated)
			}
		})
	}
	// With no pool image the node's own original image is the target.
	orig := nd("w1").on(c1, imgOrig)
	if r := Plan(worker, Target{Config: c1}, []Node{orig}); r.UpdatedCount != 1 || !r.Updated {
		t.Errorf("on its original image: updated %d Updated %v, want 1 true", r.UpdatedCount, r.Updated)
	}
	if r := Plan(worker, Target{Config: c1}, []Node{orig.original(imgOrig2)}); r.UpdatedCount != 0 || r.Updated {
		t.Errorf("on another original image: updated %d Updated %v, want 0 false", r.UpdatedCount, r.Updated)
	}
}

func TestUnavailable(t *testing.T) {
	base := nd("w1")
	cases := []struct {
		name string
		node Node
		want int32
	}{
		{"ready and done", base, 0},
		{"not ready", base.notReady(), 1},
		{"working", base.in(working), 1},
		{"rebooting", base.in(rebooting), 1},
		{"degraded", base.failed("boom"), 1},
		{"desired image not current yet", base.sent(c1, imgB), 1},
		{"desired config not current yet", base.sent(c2, imgA), 1},
		{"nothing desired yet", func() Node { n := base; n.DesiredConfig, n.DesiredImage = "", ""; return n }(), 0},
		{"only the image desired, and current", func() Node { n := base; n.DesiredConfig = ""; return n }(), 0},
		{"no state reported yet", base.in(""), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A target the node is on, so that only unavailability is measured.
			target := Target{Config: tc.node.DesiredConfig, Image: tc.node.DesiredImage}
			if target.Config == "" {
				target.Config = c1
			}
			if got := Plan(worker, target, []Node{tc.node}).UnavailableCount; got != tc.want {
				t.Errorf("unavailable = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMaxUnavailable(t *testing.T) {
	cases := []struct {
		name  string
		value *intstr.IntOrString
		nodes int
		want  int
	}{
		{"nil means 1", nil, 10, 1},
		{"int", num(3), 10, 3},
		{"int above the node count is kept", num(3), 2, 3},
		{"int 0 means 1", num(0), 10, 1},
		{"negative int means 1", num(-2), 10, 1},
		{"30% of 10", pct("30%"), 10, 3},
		{"25% of 10 rounds down", pct("25%"), 10, 2},
		{"19% of 10 rounds down", pct("19%"), 10, 1},
		{"10% of 5 is at least 1", pct("10%"), 5, 1},
		{"50% of 1", pct("50%"), 1, 1},
		{"any percent of no nodes", pct("50%"), 0, 1},
		{"100% of 7", pct("100%"), 7, 7},
		{"33% of 100", pct("33%"), 100, 33},
		{"string without percent means 1", pct("3"), 10, 1},
		{"garbage means 1", pct("many"), 10, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]Node, tc.nodes)
			for i := range nodes {
				nodes[i] = nd(fmt.Sprintf("w%03d", i))
			}
			if got := Plan(Pool{Name: "worker", MaxUnavailable: tc.value}, tA, nodes).MaxUnavailable; got != tc.want {
				t.Errorf("MaxUnavailable = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestDeterministic plans a mixed pool in many node orders: the result must
// not change, and Plan must not reorder or change its input.
func TestDeterministic(t *testing.T) {
	nodes := benchNodes(200, 2, 7)
	for i := range nodes {
		nodes[i].Pools = nodes[i].Pools[:1]
		if i%37 == 0 {
			nodes[i].Pools = []string{"pool-0", "pool-1"}
		}
	}
	pools := []Pool{
		{Name: "pool-0", MaxUnavailable: pct("10%"), MaxFailedNodes: 50},
		{Name: "pool-0", MaxUnavailable: num(1), MaxFailedNodes: 1},
		{Name: "pool-0", MaxUnavailable: pct("50%"), MaxFailedNodes: 3, Paused: true},
	}
	targets := []Target{benchTarget(0), benchTarget(1), {Config: benchTarget(0).Config}}
	rng := rand.New(rand.NewPCG(1, 2))
	var tookSome, haltedSome bool
	for _, pool := range pools {
		for _, target := range targets {
			want := Plan(pool, target, nodes)
			tookSome = tookSome || len(want.Actions) > 0
			haltedSome = haltedSome || want.Halted
			for range 20 {
				shuffled := append([]Node(nil), nodes...)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				kept := append([]Node(nil), shuffled...)
				if d := diffResult(Plan(pool, target, shuffled), want); d != "" {
					t.Fatalf("order changed the result:%s", d)
				}
				if !reflect.DeepEqual(shuffled, kept) {
					t.Fatal("Plan changed its input")
				}
			}
		}
	}
	if !tookSome || !haltedSome {
		t.Errorf("the mix should both take nodes and halt (took %v, halted %v): the test proves little", tookSome, haltedSome)
	}
}

func (n Node) staging(image string) Node {
	n.DesiredStage = image
	return n
}

// stagedLive: staged ahead, and its daemon decided the update to image
// with config Live without a drain.
func (n Node) stagedLive(image, config string) Node {
	n = n.stagedAhead(image)
	n.StagedLive = v1alpha1.UpdateKey(image, config)
	return n
}

func (n Node) stagedAhead(image string) Node {
	n.DesiredStage, n.StagedImage = image, image
	return n
}

// TestStageAheadAndCanary checks the stage-ahead set and the canary's
// phases one plan at a time; the golden rollouts show whole sequences.
func TestStageAheadAndCanary(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	ahead := func(n int) Pool { return Pool{Name: "worker", StageAhead: n} }
	canary := func(count int, soak time.Duration, started time.Time, now time.Time) Pool {
		return Pool{Name: "worker", Canary: &Canary{Count: count, Soak: soak, SoakStartedAt: started}, Now: now}
	}
	stage := func(nodes ...string) []Action {
		var out []Action
		for _, n := range nodes {
			out = append(out, Action{Node: n, Image: imgB})
		}
		return out
	}
	cases := []struct {
		name   string
		pool   Pool
		target Target
		nodes  []Node
		// want are the fields checked; the others are TestPlan's.
		wantTake                 []string
		wantStage                []Action
		wantStaged               int32
		wantHalted, wantUpdating bool
		wantCanary               *CanaryResult
	}{
		{
			name: "the next nodes by name stage, beyond the one taken", pool: ahead(2), target: tB,
			nodes:    []Node{nd("w1"), nd("w2"), nd("w3"), nd("w4")},
			wantTake: []string{"w1"}, wantStage: stage("w2", "w3"), wantUpdating: true,
		},
		{
			name: "a node holding the image staged is taken before the others", pool: ahead(1), target: tB,
			nodes:    []Node{nd("w1"), nd("w2"), nd("w3").stagedAhead(imgB)},
			wantTake: []string{"w3"}, wantStage: stage("w1"), wantStaged: 1, wantUpdating: true,
		},
		{
			name: "a node staging keeps its place over one by name", pool: ahead(1), target: tB,
			nodes:    []Node{nd("w1").sent(c2, imgB).in(working), nd("w2"), nd("w3").staging(imgB)},
			wantTake: nil, wantStage: stage("w3"), wantUpdating: true,
		},
		{
			name: "a staged image of another target does not count", pool: ahead(1), target: tB,
			nodes:     []Node{nd("w1").sent(c2, imgB).in(working), nd("w2").stagedAhead(imgC)},
			wantStage: stage("w2"), wantUpdating: true,
		},
		{
			name: "live updates staged ahead are taken beyond maxUnavailable", pool: ahead(2), target: tB,
			nodes:    []Node{nd("w1").sent(c2, imgB).in(working), nd("w2").stagedLive(imgB, c2), nd("w3").stagedLive(imgB, c2), nd("w4")},
			wantTake: []string{"w2", "w3"}, wantStage: stage("w4"), wantStaged: 2, wantUpdating: true,
		},
		{
			name: "live updates wait at maxUnavailable + stageAhead nodes unavailable", pool: ahead(1), target: tB,
			nodes:    []Node{nd("w1").sent(c2, imgB).in(working), nd("w2").sent(c2, imgB).in(working), nd("w3").stagedLive(imgB, c2)},
			wantTake: nil, wantStage: stage("w3"), wantStaged: 1, wantUpdating: true,
		},
		{
			name: "live updates fill maxUnavailable + stageAhead, no more", pool: ahead(2), target: tB,
			nodes: []Node{nd("w1").sent(c2, imgB).in(working), nd("w2").stagedLive(imgB, c2), nd("w3").stagedLive(imgB, c2),
				nd("w4").stagedLive(imgB, c2)},
			wantTake: []string{"w2", "w3"}, wantStage: stage("w4"), wantStaged: 3, wantUpdating: true,
		},
		{
			name: "decided live for an older target's image: waits for capacity", pool: ahead(1), target: tB,
			nodes:     []Node{nd("w1").sent(c2, imgB).in(working), nd("w2").stagedLive(imgC, c2)},
			wantStage: stage("w2"), wantUpdating: true,
		},
		{
			name: "decided live for another config: waits for capacity", pool: ahead(1), target: tB,
			nodes:    []Node{nd("w1").sent(c2, imgB).in(working), nd("w2").stagedLive(imgB, c1)},
			wantTake: nil, wantStage: stage("w2"), wantStaged: 1, wantUpdating: true,
		},
		{
			name: "live updates are not taken while paused", pool: Pool{Name: "worker", StageAhead: 1, Paused: true}, target: tB,
			nodes:      []Node{nd("w1").stagedLive(imgB, c2)},
			wantStaged: 1,
		},
		{
			name: "an unavailable node is taken for free, not staged", pool: ahead(2), target: tB,
			nodes:    []Node{nd("w1").notReady(), nd("w2"), nd("w3"), nd("w4")},
			wantTake: []string{"w1"}, wantStage: stage("w2", "w3"), wantUpdating: true,
		},
		{
			name: "a config-only change downloads nothing", pool: ahead(2), target: Target{Config: c2, Image: imgA},
			nodes:    []Node{nd("w1"), nd("w2"), nd("w3")},
			wantTake: []string{"w1"}, wantUpdating: true,
		},
		{
			name: "paused: nothing staged", pool: Pool{Name: "worker", StageAhead: 2, Paused: true}, target: tB,
			nodes: []Node{nd("w1"), nd("w2"), nd("w3").staging(imgB)},
		},
		{
			name: "halted: nothing staged", pool: Pool{Name: "worker", StageAhead: 2, MaxFailedNodes: 1}, target: tB,
			nodes:      []Node{nd("w1").sent(c2, imgB).failed("boom"), nd("w2").stagedAhead(imgB), nd("w3")},
			wantStaged: 1, wantHalted: true,
		},
		{
			name: "waiting for the build: nothing staged", pool: ahead(2), target: Target{Config: c2, Image: imgB, Waiting: "build"},
			nodes: []Node{nd("w1"), nd("w2")},
		},
		{
			name: "outside the window: nothing taken, the first nodes stage", pool: Pool{Name: "worker", StageAhead: 1, OutsideWindow: true}, target: tB,
			nodes:     []Node{nd("w1"), nd("w2")},
			wantStage: stage("w1"),
		},
		{
			name: "canary updating: only its nodes are taken and staged", pool: func() Pool { p := canary(2, time.Hour, time.Time{}, t0); p.StageAhead = 2; return p }(), target: tB,
			nodes:    []Node{nd("w1"), nd("w2"), nd("w3"), nd("w4")},
			wantTake: []string{"w1"}, wantStage: stage("w2"), wantUpdating: true,
			wantCanary: &CanaryResult{Phase: v1alpha1.CanaryUpdating, MachineCount: 2},
		},
		{
			name: "canary updated: the soak starts now, nothing taken", pool: canary(2, time.Hour, time.Time{}, t0), target: tB,
			nodes:        []Node{nd("w1").on(c2, imgB), nd("w2").on(c2, imgB), nd("w3")},
			wantUpdating: true,
			wantCanary:   &CanaryResult{Phase: v1alpha1.CanarySoaking, MachineCount: 2, UpdatedCount: 2, SoakStartedAt: t0, SoakUntil: t0.Add(time.Hour)},
		},
		{
			name: "soaking: a minute before its end, nothing taken", pool: canary(2, time.Hour, t0, t0.Add(59*time.Minute)), target: tB,
			nodes:        []Node{nd("w1").on(c2, imgB), nd("w2").on(c2, imgB), nd("w3")},
			wantUpdating: true,
			wantCanary:   &CanaryResult{Phase: v1alpha1.CanarySoaking, MachineCount: 2, UpdatedCount: 2, SoakStartedAt: t0, SoakUntil: t0.Add(time.Hour)},
		},
		{
			name: "soaked: at its end the rest is taken", pool: canary(2, time.Hour, t0, t0.Add(time.Hour)), target: tB,
			nodes:    []Node{nd("w1").on(c2, imgB), nd("w2").on(c2, imgB), nd("w3")},
			wantTake: []string{"w3"}, wantUpdating: true,
			wantCanary: &CanaryResult{Phase: v1alpha1.CanaryDone, MachineCount: 2, UpdatedCount: 2, SoakStartedAt: t0, SoakUntil: t0.Add(time.Hour)},
		},
		{
			name: "one canary failure halts although maxFailedNodes is 3", pool: func() Pool { p := canary(2, time.Hour, time.Time{}, t0); p.MaxFailedNodes = 3; return p }(), target: tB,
			nodes:      []Node{nd("w1").on(c2, imgB), nd("w2").sent(c2, imgB).failed("rolled back"), nd("w3")},
			wantHalted: true,
			wantCanary: &CanaryResult{Phase: v1alpha1.CanaryUpdating, MachineCount: 2, UpdatedCount: 1},
		},
		{
			name: "after the soak maxFailedNodes applies again", pool: func() Pool {
				p := canary(1, time.Hour, t0, t0.Add(2*time.Hour))
				p.MaxFailedNodes, p.MaxUnavailable = 3, num(2)
				return p
			}(), target: tB,
			nodes:    []Node{nd("w1").on(c2, imgB), nd("w2").sent(c2, imgB).failed("rolled back"), nd("w3")},
			wantTake: []string{"w3"}, wantUpdating: true,
			wantCanary: &CanaryResult{Phase: v1alpha1.CanaryDone, MachineCount: 1, UpdatedCount: 1, SoakStartedAt: t0, SoakUntil: t0.Add(time.Hour)},
		},
		{
			name: "a failure of a node outside the canary during the soak halts", pool: func() Pool { p := canary(1, time.Hour, t0, t0.Add(time.Minute)); p.MaxFailedNodes = 3; return p }(), target: tB,
			nodes:      []Node{nd("w1").on(c2, imgB), nd("w2").sent(c2, imgB).failed("rolled back"), nd("w3")},
			wantHalted: true,
			wantCanary: &CanaryResult{Phase: v1alpha1.CanarySoaking, MachineCount: 1, UpdatedCount: 1, SoakStartedAt: t0, SoakUntil: t0.Add(time.Hour)},
		},
		{
			name: "by selector: the selected nodes go first, whatever their names", pool: Pool{Name: "worker", Canary: &Canary{BySelector: true, Soak: time.Hour}, Now: t0}, target: tB,
			nodes:    inCanary([]Node{nd("w1"), nd("w2"), nd("w3")}, "w3"),
			wantTake: []string{"w3"}, wantUpdating: true,
			wantCanary: &CanaryResult{Phase: v1alpha1.CanaryUpdating, MachineCount: 1},
		},
		{
			name: "every node on the target: no soak", pool: canary(1, time.Hour, time.Time{}, t0), target: tB,
			nodes:      []Node{nd("w1").on(c2, imgB), nd("w2").on(c2, imgB)},
			wantCanary: &CanaryResult{Phase: v1alpha1.CanaryDone, MachineCount: 1, UpdatedCount: 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Plan(tc.pool, tc.target, tc.nodes)
			var took []string
			for _, a := range r.Actions {
				took = append(took, a.Node)
			}
			if !reflect.DeepEqual(took, tc.wantTake) {
				t.Errorf("took %v, want %v", took, tc.wantTake)
			}
			if !reflect.DeepEqual(r.Stage, tc.wantStage) {
				t.Errorf("stage %v, want %v", r.Stage, tc.wantStage)
			}
			if r.StagedAheadCount != tc.wantStaged {
				t.Errorf("staged ahead %d, want %d", r.StagedAheadCount, tc.wantStaged)
			}
			if r.Halted != tc.wantHalted || r.Updating != tc.wantUpdating {
				t.Errorf("halted %v updating %v, want %v and %v", r.Halted, r.Updating, tc.wantHalted, tc.wantUpdating)
			}
			if !reflect.DeepEqual(r.Canary, tc.wantCanary) {
				t.Errorf("canary %+v, want %+v", r.Canary, tc.wantCanary)
			}
		})
	}
}
