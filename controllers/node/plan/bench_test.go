package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
)

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// benchTarget is pool p's new target. Every fifth pool has no image, as a
// pool whose MachineOSConfig was deleted: its nodes go back to their
// original images.
func benchTarget(p int) Target {
	t := Target{Config: fmt.Sprintf("rendered-pool-%d-%s", p, digest(fmt.Sprint("new", p))[:32])}
	if p%5 != 4 {
		t.Image = fmt.Sprintf("registry.example.com/strata/pool-%d@sha256:%s", p, digest(fmt.Sprint("image", p)))
	}
	return t
}

// benchNodes makes total nodes spread over pools pools, mid-rollout from an
// old target to benchTarget: most updated, some still on the old target,
// some in flight, some failed (most on the old target), some NotReady, a
// few selected by two pools and a few whose daemon has not reported the
// original image yet.
func benchNodes(total, pools int, seed uint64) []Node {
	rng := rand.New(rand.NewPCG(seed, seed))
	orig := "registry.example.com/fedora-bootc@sha256:" + digest("orig")
	nodes := make([]Node, total)
	for i := range nodes {
		p := i % pools
		target := benchTarget(p)
		newImage := target.Image
		if newImage == "" {
			newImage = orig
		}
		oldConfig := fmt.Sprintf("rendered-pool-%d-%s", p, digest(fmt.Sprint("old", p))[:32])
		oldImage := fmt.Sprintf("registry.example.com/strata/pool-%d@sha256:%s", p, digest(fmt.Sprint("old", p)))
		n := Node{
			Name:  fmt.Sprintf("pool-%d-node-%04d", p, i),
			Ready: true, Pools: []string{fmt.Sprintf("pool-%d", p)},
			OriginalImage: orig, State: done,
		}
		set := func(curC, curI, desC, desI string) {
			n.CurrentConfig, n.CurrentImage, n.DesiredConfig, n.DesiredImage = curC, curI, desC, desI
		}
		switch x := rng.IntN(100); {
		case x < 60: // updated
			set(target.Config, newImage, target.Config, newImage)
		case x < 75: // still on the old target
			set(oldConfig, oldImage, oldConfig, oldImage)
		case x < 83: // in flight
			set(oldConfig, oldImage, target.Config, newImage)
			n.State = []string{done, working, rebooting}[rng.IntN(3)]
		case x < 88: // failed the old target
			set(oldConfig, orig, oldConfig, oldImage)
			n.State, n.Reason = degraded, "image "+oldImage+" failed its health check; rolled back to "+orig
		case x < 90: // failed the new target
			set(oldConfig, oldImage, target.Config, newImage)
			n.State, n.Reason = degraded, "drain timed out after 10m0s: pod db-0 (budget db)"
		case x < 93: // selected by two pools
			set(oldConfig, oldImage, oldConfig, oldImage)
			n.Pools = append(n.Pools, fmt.Sprintf("pool-%d", (p+1)%pools))
		case x < 95: // daemon not started yet
			n.OriginalImage = ""
			set(oldConfig, oldImage, oldConfig, oldImage)
		default: // on the old target, NotReady
			set(oldConfig, oldImage, oldConfig, oldImage)
			n.Ready = false
		}
		if rng.IntN(100) < 3 {
			n.Ready = false
		}
		nodes[i] = n
	}
	return nodes
}

// BenchmarkPlan plans all 10 pools of a 1,000-node cluster, as the rollout
// controller does when every pool is requeued at once (a resync). The
// goal is under 10 ms per full plan.
func BenchmarkPlan(b *testing.B) {
	const pools = 10
	all := benchNodes(1000, pools, 42)
	byPool := make([][]Node, pools)
	for _, n := range all {
		var p int
		if _, err := fmt.Sscanf(n.Pools[0], "pool-%d", &p); err != nil {
			b.Fatal(err)
		}
		byPool[p] = append(byPool[p], n)
	}
	specs := make([]Pool, pools)
	targets := make([]Target, pools)
	for p := range pools {
		specs[p] = Pool{Name: fmt.Sprintf("pool-%d", p), MaxUnavailable: pct("20%"), MaxFailedNodes: 5}
		targets[p] = benchTarget(p)
	}
	b.ReportAllocs()
	var actions int
	for b.Loop() {
		actions = 0
		for p := range pools {
			actions += len(Plan(specs[p], targets[p], byPool[p]).Actions)
		}
	}
	if actions == 0 {
		b.Fatal("no pool took a node: the benchmark measures an idle planner")
	}
}
