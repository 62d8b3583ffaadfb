package nodemetrics

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Phases of a node update (the phase label), and the total.
const (
	PhaseStage  = "stage"
	PhaseDrain  = "drain"
	PhaseApply  = "apply"
	PhaseReboot = "reboot"
	PhaseVerify = "verify"
	PhaseTotal  = "total"
)

// Reboot kinds (the reboot label).
const (
	RebootFull = "full"
	RebootSoft = "soft"
	RebootNone = "none"
)

// Results of drains and updates.
const (
	DrainSucceeded = "Succeeded"
	DrainTimedOut  = "TimedOut"
	UpdateDone     = v1alpha1.NodeStateDone
	UpdateDegraded = v1alpha1.NodeStateDegraded
)

// view is what step reads of a node: the protocol's annotations.
type view struct {
	pool                        string
	desiredConfig, desiredImage string
	currentConfig, currentImage string
	state                       string
	desiredDrain, appliedDrain  string
	disruption                  string
}

func viewOf(n *corev1.Node) view {
	a := n.Annotations
	return view{
		pool:          a[v1alpha1.NodePoolAnnotation],
		desiredConfig: a[v1alpha1.DesiredConfigAnnotation], desiredImage: a[v1alpha1.DesiredImageAnnotation],
		currentConfig: a[v1alpha1.CurrentConfigAnnotation], currentImage: a[v1alpha1.CurrentImageAnnotation],
		state:        a[v1alpha1.StateAnnotation],
		desiredDrain: a[v1alpha1.DesiredDrainAnnotation], appliedDrain: a[v1alpha1.LastAppliedDrainAnnotation],
		disruption: a[v1alpha1.DisruptionAnnotation],
	}
}

// key is the update key of the desired pair; "" without one.
func (v view) key() string {
	if v.desiredConfig == "" && v.desiredImage == "" {
		return ""
	}
	return v1alpha1.UpdateKey(v.desiredImage, v.desiredConfig)
}

// done: the node runs its desired pair and says so.
func (v view) done() bool {
	return v.state == v1alpha1.NodeStateDone && v.currentConfig == v.desiredConfig && v.currentImage == v.desiredImage
}

// drainPending: the daemon asked for a drain not carried out yet.
func (v view) drainPending() bool {
	return strings.HasPrefix(v.desiredDrain, v1alpha1.DrainRequestPrefix) && v.desiredDrain != v.appliedDrain
}

// rebootKind is the kind of the reboot a node reporting Rebooting takes.
func (v view) rebootKind() string {
	if strings.HasPrefix(v.disruption, "SoftReboot") {
		return RebootSoft
	}
	return RebootFull
}

// track is what is remembered of a node's update between its changes.
type track struct {
	key string
	// started is when the update started; zero: not seen.
	started time.Time
	phase   string
	// phaseStarted is when phase started; zero: not seen.
	phaseStarted time.Time
	// reboot is the kind of the update's first reboot; "" before it.
	reboot string
	// ended: the update ended Degraded; nothing more is observed of it.
	ended bool
}

// kind of an observation.
type kind int

const (
	phaseTook kind = iota
	updateEnded
	rolledBack
	drainEnded
)

// observation is one thing to record in the metrics.
type observation struct {
	kind    kind
	pool    string
	phase   string
	seconds float64
	reboot  string
	result  string
}

// step is the pure core: given what was remembered of the node (nil:
// nothing), its previous annotations (nil: first seen) and its current
// ones, observed at now, it returns what to remember and what to record.
func step(tr *track, old *view, cur view, now time.Time) (*track, []observation) {
	var obs []observation
	if old != nil {
		if cur.appliedDrain != old.appliedDrain && strings.HasPrefix(cur.appliedDrain, v1alpha1.DrainRequestPrefix) {
			obs = append(obs, observation{kind: drainEnded, pool: cur.pool, result: DrainSucceeded})
		}
		if cur.state == v1alpha1.NodeStateDegraded && old.state != v1alpha1.NodeStateDegraded && cur.drainPending() {
			obs = append(obs, observation{kind: drainEnded, pool: cur.pool, result: DrainTimedOut})
		}
	}

	key := cur.key()
	if key == "" {
		return nil, obs
	}
	if tr == nil || tr.key != key {
		tr = begin(old, cur, key, now)
		if tr == nil {
			return nil, obs
		}
	}
	if tr.ended {
		return tr, obs
	}

	// phaseEnds records the end of the current phase and starts next.
	phaseEnds := func(next string) {
		if !tr.phaseStarted.IsZero() {
			obs = append(obs, observation{kind: phaseTook, pool: cur.pool, phase: tr.phase, seconds: now.Sub(tr.phaseStarted).Seconds()})
		}
		tr.phase, tr.phaseStarted = next, now
	}
	// updateEnds records the end of the update with result.
	updateEnds := func(result string) {
		phaseEnds("")
		if !tr.started.IsZero() {
			obs = append(obs, observation{kind: phaseTook, pool: cur.pool, phase: PhaseTotal, seconds: now.Sub(tr.started).Seconds()})
			reboot := tr.reboot
			switch {
			case reboot == "":
				reboot = RebootNone
			case reboot == RebootSoft && cur.rebootKind() != RebootSoft:
				// The soft reboot failed and the daemon rebooted fully,
				// saying so in the disruption annotation.
				reboot = RebootFull
			}
			obs = append(obs, observation{kind: updateEnded, pool: cur.pool, reboot: reboot, result: result})
		}
		if result == UpdateDegraded && tr.reboot != "" {
			obs = append(obs, observation{kind: rolledBack, pool: cur.pool})
		}
	}

	switch {
	case cur.done():
		updateEnds(UpdateDone)
		return nil, obs
	case cur.state == v1alpha1.NodeStateDegraded:
		updateEnds(UpdateDegraded)
		tr.ended = true
		return tr, obs
	}
	// The phases in order; a report can skip some (an update that does
	// not drain, a drain and its acknowledgement seen in one change).
	for {
		switch {
		case tr.phase == PhaseStage && cur.desiredDrain == v1alpha1.DrainRequestPrefix+key:
			phaseEnds(PhaseDrain)
			continue
		case tr.phase == PhaseDrain && cur.appliedDrain == v1alpha1.DrainRequestPrefix+key:
			phaseEnds(PhaseApply)
			continue
		case (tr.phase == PhaseStage || tr.phase == PhaseApply || tr.phase == PhaseVerify) && cur.state == v1alpha1.NodeStateRebooting:
			// verify -> reboot: the rollback's reboot.
			if tr.reboot == "" {
				tr.reboot = cur.rebootKind()
			}
			phaseEnds(PhaseReboot)
		case tr.phase == PhaseReboot && cur.state != v1alpha1.NodeStateRebooting:
			phaseEnds(PhaseVerify)
		}
		return tr, obs
	}
}

// begin starts following the update of key. An update seen starting (the
// desired pair just changed, and the node does not run it) is timed from
// now; one found under way when the tracker first sees the node is
// followed from the phase its annotations show, untimed.
func begin(old *view, cur view, key string, now time.Time) *track {
	if cur.done() {
		return nil
	}
	if old != nil && old.key() != key {
		return &track{key: key, started: now, phase: PhaseStage, phaseStarted: now}
	}
	tr := &track{key: key, phase: PhaseStage}
	switch {
	case cur.state == v1alpha1.NodeStateDegraded:
		tr.ended = true
	case cur.state == v1alpha1.NodeStateRebooting:
		tr.phase, tr.reboot = PhaseReboot, cur.rebootKind()
	case cur.appliedDrain == v1alpha1.DrainRequestPrefix+key:
		tr.phase = PhaseApply
	case cur.desiredDrain == v1alpha1.DrainRequestPrefix+key:
		tr.phase = PhaseDrain
	}
	return tr
}
