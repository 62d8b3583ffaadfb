package plan

import (
	"slices"
	"time"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Canary is what the planner needs of a pool's spec.canary and of the
// soak its status recorded.
type Canary struct {
	// Count makes the canary the first Count nodes of the pool by name;
	// with BySelector, the nodes with InCanary set instead.
	Count      int
	BySelector bool
	// Soak is how long the pool waits once the canary runs the target.
	Soak time.Duration
	// SoakStartedAt is when the soak of the current target started, as
	// recorded; zero when it has not, or when the record is of another
	// target (the caller compares).
	SoakStartedAt time.Time
}

// CanaryResult is the canary's progress for the target.
type CanaryResult struct {
	Phase                      v1alpha1.CanaryPhase
	MachineCount, UpdatedCount int32
	// SoakStartedAt is when the soak started: the recorded time, or Now
	// when it starts with this plan (the caller records it). Zero while
	// the canary updates, and when no soak was needed.
	SoakStartedAt time.Time
	// SoakUntil is when the soak ends; the caller comes back then, as no
	// watch sees it happen.
	SoakUntil time.Time
}

// canaryMembers names the canary's nodes: those the selector selects, or
// the first Count of the pool's nodes by name (nodes in conflict are no
// node of the pool).
func canaryMembers(c *Canary, nodes []Node) map[string]bool {
	if c == nil {
		return nil
	}
	in := map[string]bool{}
	if c.BySelector {
		for i := range nodes {
			if nodes[i].InCanary && len(nodes[i].Pools) <= 1 {
				in[nodes[i].Name] = true
			}
		}
		return in
	}
	var names []string
	for i := range nodes {
		if len(nodes[i].Pools) <= 1 {
			names = append(names, nodes[i].Name)
		}
	}
	slices.Sort(names)
	for _, n := range names[:min(c.Count, len(names))] {
		in[n] = true
	}
	return in
}

// canaryPhase works out where the canary is: Updating until every canary
// node runs the target; then Soaking from SoakStartedAt (now, if not
// recorded) for Soak; then Done. A canary that leaves no other node to
// take needs no soak.
func canaryPhase(c *Canary, now time.Time, count, updated int32, candidates []candidate) *CanaryResult {
	r := &CanaryResult{MachineCount: count, UpdatedCount: updated}
	if updated < count {
		r.Phase = v1alpha1.CanaryUpdating
		return r
	}
	r.Phase = v1alpha1.CanaryDone
	if !c.SoakStartedAt.IsZero() {
		r.SoakStartedAt, r.SoakUntil = c.SoakStartedAt, c.SoakStartedAt.Add(c.Soak)
	}
	if !slices.ContainsFunc(candidates, func(c candidate) bool { return !c.canary }) {
		return r
	}
	if r.SoakStartedAt.IsZero() {
		// To the second, as the pool's status records it: the start
		// read back must be the start planned with.
		start := now.Truncate(time.Second)
		r.SoakStartedAt, r.SoakUntil = start, start.Add(c.Soak)
	}
	if now.Before(r.SoakUntil) {
		r.Phase = v1alpha1.CanarySoaking
	}
	return r
}

// split divides the candidates into those the rollout may take now and
// those it takes next (from which nodes stage ahead): while the canary
// updates, the canary's nodes for both; while it soaks, none now and the
// others next; once done, every candidate for both.
func (r *CanaryResult) split(candidates []candidate) (eligible, next []candidate) {
	switch r.Phase {
	case v1alpha1.CanaryUpdating:
		in := canaryOnly(candidates, true)
		return in, in
	case v1alpha1.CanarySoaking:
		return nil, canaryOnly(candidates, false)
	}
	return candidates, candidates
}

func canaryOnly(candidates []candidate, canary bool) []candidate {
	var out []candidate
	for _, c := range candidates {
		if c.canary == canary {
			out = append(out, c)
		}
	}
	return out
}
