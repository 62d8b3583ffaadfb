package plan

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Steps is a progressive rollout: the target reaches the pool in
// cumulative steps (a count or a percentage of the pool), each followed
// by a soak, and each must reach its success threshold before the next
// starts.
type Steps struct {
	Steps []Step
	// SuccessThreshold is the share of the nodes sent the target so far
	// that must run it (Done) for a step to succeed, a percentage; nil is
	// 100%. Below it, once the step's nodes are all finished, the rollout
	// halts.
	SuccessThreshold *intstr.IntOrString
	// SoakStep and SoakStartedAt are the soak the caller recorded for the
	// current target: the step's index and when its soak started (zero:
	// none recorded, or of another target; the caller compares).
	SoakStep      int
	SoakStartedAt time.Time
}

// Step is one step: the pool's nodes sent the target once it is done
// (cumulative; a percentage is of the pool, rounded up), and the soak
// after it.
type Step struct {
	Size *intstr.IntOrString
	Soak time.Duration
}

// Step phases.
const (
	StepUpdating = "Updating"
	StepSoaking  = "Soaking"
	StepFailed   = "Failed"
	StepsDone    = "Done"
)

// StepResult is where a progressive rollout stands.
type StepResult struct {
	// Index is the current step (0-based) of Count; Size its cumulative
	// node count.
	Index, Count, Size int
	Phase              string
	// Sent is how many nodes were sent the target; Updated how many run
	// it; Needed how many must, for the step to succeed.
	Sent, Updated, Needed int
	// SoakStartedAt and SoakUntil are the current step's soak: the
	// recorded start, or Now when it starts with this plan (the caller
	// records it).
	SoakStartedAt, SoakUntil time.Time
	// allowance is how many more nodes the step may be sent now.
	allowance int
}

// stepSizes resolves the steps' sizes against the pool's node count:
// cumulative, each at least 1 and at least the one before, and a last
// step of the whole pool when the steps stop short of it.
func stepSizes(steps []Step, machines int) []int {
	out := make([]int, 0, len(steps)+1)
	prev := 0
	for _, s := range steps {
		n, err := intstr.GetScaledValueFromIntOrPercent(s.Size, machines, true)
		if err != nil {
			n = machines
		}
		n = min(max(n, prev, 1), machines)
		out = append(out, n)
		prev = n
	}
	if prev < machines {
		out = append(out, machines)
	}
	return out
}

// stepPhase works out the current step from how many nodes were sent the
// target (sent), run it (updated), and are still updating on it
// (inFlight), and how many more may be sent now. A step is done when its
// nodes were all sent the target, none still updates, at least the
// threshold of the nodes sent run it, and its soak is over; nodes beyond
// a step are sent only then, so a step with more nodes sent than its size
// was done.
func stepPhase(s *Steps, now time.Time, machines, sent, updated int, inFlight bool) *StepResult {
	sizes := stepSizes(s.Steps, machines)
	r := &StepResult{Count: len(sizes), Sent: sent, Updated: updated}
	for k, size := range sizes {
		r.Index, r.Size = k, size
		r.Needed = needed(s.SuccessThreshold, sent)
		r.SoakStartedAt, r.SoakUntil = time.Time{}, time.Time{}
		switch {
		case sent < size:
			r.Phase, r.allowance = StepUpdating, size-sent
			return r
		case sent > size:
			// The next step started: this one was done.
			continue
		case inFlight:
			r.Phase = StepUpdating
			return r
		case updated < r.Needed:
			r.Phase = StepFailed
			return r
		}
		soak := time.Duration(0)
		if k < len(s.Steps) {
			soak = s.Steps[k].Soak
		}
		if soak <= 0 || k == len(sizes)-1 {
			continue
		}
		start := s.SoakStartedAt
		if s.SoakStep != k || start.IsZero() {
			// To the second, as the pool's status records it.
			start = now.Truncate(time.Second)
		}
		r.SoakStartedAt, r.SoakUntil = start, start.Add(soak)
		if now.Before(r.SoakUntil) {
			r.Phase = StepSoaking
			return r
		}
	}
	r.Phase, r.allowance = StepsDone, math.MaxInt
	return r
}

// needed is how many of sent nodes must run the target: threshold
// (a percentage; nil is 100%) of them, rounded up.
func needed(threshold *intstr.IntOrString, sent int) int {
	if threshold == nil {
		return sent
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(threshold, sent, true)
	if err != nil {
		return sent
	}
	return min(max(n, 0), sent)
}
