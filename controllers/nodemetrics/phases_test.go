package nodemetrics

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// change is one write to a node's annotations, at second at of the test.
type change struct {
	at  int
	set map[string]string
}

const (
	cfg0, img0 = "rendered-p-0", "r/os@sha256:0"
	cfg1, img1 = "rendered-p-1", "r/os@sha256:1"
)

var key1 = v1alpha1.UpdateKey(img1, cfg1)

// Shorthands for the protocol's writes.
func take() change {
	return change{0, map[string]string{"desiredConfig": cfg1, "desiredImage": img1}}
}
func state(at int, s string) change { return change{at, map[string]string{"state": s}} }
func askDrain(at int) change        { return change{at, map[string]string{"desiredDrain": "drain-" + key1}} }
func drained(at int) change {
	return change{at, map[string]string{"lastAppliedDrain": "drain-" + key1}}
}
func decided(at int, kind string) change {
	return change{at, map[string]string{"disruption": kind + ": because"}}
}
func finished(at int) change {
	return change{at, map[string]string{"currentConfig": cfg1, "currentImage": img1, "state": "Done", "desiredDrain": "uncordon-" + key1}}
}
func failed(at int) change {
	return change{at, map[string]string{"state": "Degraded", "desiredDrain": "uncordon-" + key1}}
}

// start is a node done on (cfg0, img0) in pool p.
func start() view {
	return view{pool: "p", desiredConfig: cfg0, desiredImage: img0, currentConfig: cfg0, currentImage: img0, state: "Done"}
}

func apply(v view, set map[string]string) view {
	for k, val := range set {
		switch k {
		case "desiredConfig":
			v.desiredConfig = val
		case "desiredImage":
			v.desiredImage = val
		case "currentConfig":
			v.currentConfig = val
		case "currentImage":
			v.currentImage = val
		case "state":
			v.state = val
		case "desiredDrain":
			v.desiredDrain = val
		case "lastAppliedDrain":
			v.appliedDrain = val
		case "disruption":
			v.disruption = val
		default:
			panic("unknown annotation " + k)
		}
	}
	return v
}

func (o observation) String() string {
	switch o.kind {
	case phaseTook:
		return fmt.Sprintf("%s %gs", o.phase, o.seconds)
	case updateEnded:
		return fmt.Sprintf("update %s %s", o.reboot, o.result)
	case rolledBack:
		return "rollback"
	default:
		return "drain " + o.result
	}
}

// run feeds the changes to step as the tracker would, every observation
// in pool p, and returns them as strings.
func run(t *testing.T, first view, seenFromStart bool, changes []change) []string {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tr *track
	var out []string
	cur := first
	if !seenFromStart {
		// The tracker starts with the node as the first change leaves it.
		cur = apply(cur, changes[0].set)
		tr, _ = step(nil, nil, cur, t0)
		changes = changes[1:]
	}
	for _, c := range changes {
		prev := cur
		cur = apply(cur, c.set)
		var obs []observation
		tr, obs = step(tr, &prev, cur, t0.Add(time.Duration(c.at)*time.Second))
		for _, o := range obs {
			if o.pool != "p" {
				t.Errorf("observation %v in pool %q, want p", o, o.pool)
			}
			out = append(out, o.String())
		}
	}
	return out
}

func TestStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes []change
		// resumed: the tracker first sees the node after changes[0].
		resumed bool
		want    []string
	}{{
		name: "full reboot, healthy at once",
		changes: []change{take(), state(1, "Working"), decided(20, "Reboot"), askDrain(20), drained(50),
			state(55, "Rebooting"), finished(115)},
		want: []string{"stage 20s", "drain Succeeded", "drain 30s", "apply 5s", "reboot 60s", "total 115s", "update full Done"},
	}, {
		name: "soft reboot, then waiting for health",
		changes: []change{take(), state(2, "Working"), decided(10, "SoftReboot"), askDrain(10), drained(12),
			state(13, "Rebooting"), state(33, "Working"), finished(93)},
		want: []string{"stage 10s", "drain Succeeded", "drain 2s", "apply 1s", "reboot 20s", "verify 60s", "total 93s", "update soft Done"},
	}, {
		name: "soft reboot refused: a full one instead",
		changes: []change{take(), decided(10, "SoftReboot"), askDrain(10), drained(12),
			state(13, "Rebooting"), decided(14, "Reboot"), finished(80)},
		want: []string{"stage 10s", "drain Succeeded", "drain 2s", "apply 1s", "reboot 67s", "total 80s", "update full Done"},
	}, {
		name:    "live apply without a drain",
		changes: []change{take(), state(1, "Working"), decided(8, "Live"), finished(9)},
		want:    []string{"stage 9s", "total 9s", "update none Done"},
	}, {
		name:    "live apply after a drain",
		changes: []change{take(), state(1, "Working"), decided(8, "Live"), askDrain(8), drained(18), finished(21)},
		want:    []string{"stage 8s", "drain Succeeded", "drain 10s", "apply 3s", "total 21s", "update none Done"},
	}, {
		name: "unhealthy: rolled back by the daemon",
		changes: []change{take(), state(1, "Working"), decided(10, "Reboot"), askDrain(10), drained(20),
			state(21, "Rebooting"), state(81, "Working"), state(681, "Rebooting"), failed(741)},
		want: []string{"stage 10s", "drain Succeeded", "drain 10s", "apply 1s", "reboot 60s", "verify 600s",
			"reboot 60s", "total 741s", "update full Degraded", "rollback"},
	}, {
		name: "the image did not boot: rolled back by the boot check",
		changes: []change{take(), decided(10, "Reboot"), askDrain(10), drained(20),
			state(21, "Rebooting"), failed(200)},
		want: []string{"stage 10s", "drain Succeeded", "drain 10s", "apply 1s", "reboot 179s", "total 200s", "update full Degraded", "rollback"},
	}, {
		name: "drain timed out: Degraded, no rollback, reported once",
		changes: []change{take(), decided(10, "Reboot"), askDrain(10), state(610, "Degraded"),
			{620, map[string]string{"state": "Degraded"}}},
		want: []string{"stage 10s", "drain TimedOut", "drain 600s", "total 610s", "update none Degraded"},
	}, {
		name:    "drain asked and done in one change",
		changes: []change{take(), {10, map[string]string{"desiredDrain": "drain-" + key1, "lastAppliedDrain": "drain-" + key1}}, finished(15)},
		want:    []string{"drain Succeeded", "stage 10s", "drain 0s", "apply 5s", "total 15s", "update none Done"},
	}, {
		name:    "config change for the running image",
		changes: []change{{0, map[string]string{"desiredConfig": cfg1}}, {3, map[string]string{"currentConfig": cfg1}}},
		want:    []string{"stage 3s", "total 3s", "update none Done"},
	}, {
		name: "superseded by a newer pair: the old update is not counted",
		changes: []change{take(), askDrain(5),
			{6, map[string]string{"desiredConfig": "rendered-p-2"}}, {16, map[string]string{"currentConfig": "rendered-p-2", "currentImage": img1}}},
		want: []string{"stage 5s", "stage 10s", "total 10s", "update none Done"},
	}, {
		name:    "desired set back to what the node runs: nothing to time",
		changes: []change{take(), {1, map[string]string{"desiredConfig": cfg0, "desiredImage": img0}}},
		want:    nil,
	}, {
		name:    "seen first while rebooting: the reboot counts for a rollback, nothing is timed",
		resumed: true,
		changes: []change{{0, map[string]string{"desiredConfig": cfg1, "desiredImage": img1, "state": "Rebooting", "lastAppliedDrain": "drain-" + key1}},
			state(30, "Working"), state(40, "Rebooting"), failed(90)},
		want: []string{"verify 10s", "reboot 50s", "rollback"},
	}, {
		name:    "seen first mid-drain: later phases are timed, the update is not counted",
		resumed: true,
		changes: []change{{0, map[string]string{"desiredConfig": cfg1, "desiredImage": img1, "state": "Working", "desiredDrain": "drain-" + key1}},
			drained(30), state(31, "Rebooting"), finished(90)},
		want: []string{"drain Succeeded", "apply 1s", "reboot 59s"},
	}, {
		name:    "seen first Done on its desired pair: nothing",
		resumed: true,
		changes: []change{finished(0), state(5, "Done")},
		want:    nil,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := run(t, start(), !tc.resumed, tc.changes)
			if !slices.Equal(got, tc.want) {
				t.Errorf("observations\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
