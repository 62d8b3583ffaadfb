package node

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func berlin(t *testing.T, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	must(t, err)
	v, err := time.ParseInLocation(time.RFC3339, s, loc)
	must(t, err)
	return v
}

// tick makes the rollout controller reconcile the pool now, as the
// requeue at a window's opening or closing would (whose delay is real
// time, not the fake clock's): a label change passes its predicate.
func (f *fixture) tick(n int) {
	f.t.Helper()
	must(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := f.poolObj()
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels["test-tick"] = strconv.Itoa(n)
		return env.Client.Update(context.Background(), p)
	}))
}

func (f *fixture) waitWindow(open bool, closes, next string) {
	f.t.Helper()
	eventually(f.t, "pool "+f.pool+" maintenanceWindow", func() error {
		w := f.poolObj().Status.MaintenanceWindow
		if w == nil {
			return fmt.Errorf("no maintenanceWindow status")
		}
		show := func(t *metav1.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format(time.RFC3339)
		}
		want := func(s string) string {
			if s == "" {
				return ""
			}
			return berlin(f.t, s).UTC().Format(time.RFC3339)
		}
		if w.Open != open || show(w.ClosesAt) != want(closes) || show(w.NextOpensAt) != want(next) {
			return fmt.Errorf("open %v closesAt %q nextOpensAt %q; want %v %q %q", w.Open, show(w.ClosesAt), show(w.NextOpensAt), open, want(closes), want(next))
		}
		return nil
	})
}

// TestMaintenanceWindowGatesNodeStarts drives a fake clock through a
// window that crosses midnight and the autumn DST change in Berlin
// (Saturday 22:00 CEST for 5h: it closes at 02:00 CET, after 02:xx has
// passed once): no node is taken before it opens, nodes are taken inside
// it, a node updating when it closes finishes and no other starts.
func TestMaintenanceWindowGatesNodeStarts(t *testing.T) {
	f := newFixture(t, "win", 2, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.MaxUnavailable = ptrIntOrString(intstr.FromInt32(1))
		p.Spec.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{
			Days: []v1alpha1.Weekday{v1alpha1.Saturday}, Start: "22:00",
			Duration: metav1.Duration{Duration: 5 * time.Hour}, TimeZone: "Europe/Berlin",
		}}
	})
	cfg := "rendered-win-1"
	f.layer(cfg, image('a'))
	clk := clocktesting.NewFakePassiveClock(berlin(t, "2026-10-24T21:00:00+02:00"))

	// One reconcile by hand first: it asks to come back exactly when the
	// window opens, an hour later.
	r := &Reconciler{Client: env.Client, Recorder: events.NewFakeRecorder(10), Clock: clk}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "win"}})
	must(t, err)
	if res.RequeueAfter != time.Hour {
		t.Errorf("requeue after %s, want 1h (the window's opening)", res.RequeueAfter)
	}

	startControllerWithClock(t, clk)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonOutsideMaintenanceWindow,
		"the next window opens at 2026-10-24T22:00:00+02:00 (Europe/Berlin): 0 of 2 nodes run")
	f.waitWindow(false, "", "2026-10-24T22:00:00+02:00")
	// The status is written after the nodes in the same reconcile, and the
	// window was never open: nothing can have been taken.
	if got := f.taken(cfg, image('a')); len(got) != 0 {
		t.Fatalf("taken %v outside the window", got)
	}

	// Sunday 00:30 CEST: open, past midnight.
	clk.SetTime(berlin(t, "2026-10-25T00:30:00+02:00"))
	f.tick(1)
	first := f.waitTaken(cfg, image('a'), 1)
	f.waitWindow(true, "2026-10-25T02:00:00+01:00", "2026-10-31T22:00:00+01:00")
	f.annotate(first[0], v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking)

	// 02:30 CET, the second 02:30 of the night: five elapsed hours have
	// passed, so the window is closed although the wall clock reads less
	// than 03:00. The working node goes on; the other is not taken.
	clk.SetTime(berlin(t, "2026-10-25T02:30:00+01:00"))
	f.tick(2)
	f.waitCondition(v1alpha1.PoolUpdating, "True", v1alpha1.ReasonRollingOut, "nodes already updating finish")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonOutsideMaintenanceWindow,
		"the next window opens at 2026-10-31T22:00:00+01:00 (Europe/Berlin)")
	f.waitWindow(false, "", "2026-10-31T22:00:00+01:00")
	f.finish(first[0])
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonOutsideMaintenanceWindow, "1 of 2 nodes run")
	f.waitCondition(v1alpha1.PoolUpdating, "False", v1alpha1.ReasonOutsideMaintenanceWindow, "")
	if got := f.taken(cfg, image('a')); len(got) != 1 {
		t.Fatalf("taken %v after the window closed, want only %s", got, first[0])
	}

	// The next Saturday's window takes the other node.
	clk.SetTime(berlin(t, "2026-10-31T22:00:00+01:00"))
	f.tick(3)
	f.waitTaken(cfg, image('a'), 2)
	f.waitWindow(true, "2026-11-01T03:00:00+01:00", "2026-11-07T22:00:00+01:00")

	// Without windows the status says nothing about them.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := f.poolObj()
		p.Spec.MaintenanceWindows = nil
		return env.Client.Update(context.Background(), p)
	}))
	eventually(t, "maintenanceWindow status removed", func() error {
		if w := f.poolObj().Status.MaintenanceWindow; w != nil {
			return fmt.Errorf("maintenanceWindow %+v", *w)
		}
		return nil
	})
}

// TestUnknownTimeZoneHoldsTheRollout: a zone the controller cannot load
// fails closed, with the field named, until it is fixed.
func TestUnknownTimeZoneHoldsTheRollout(t *testing.T) {
	f := newFixture(t, "badzone", 1, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.MaintenanceWindows = []v1alpha1.MaintenanceWindow{
			{Days: []v1alpha1.Weekday{v1alpha1.Monday}, Start: "00:00", Duration: metav1.Duration{Duration: 168 * time.Hour}},
			{Days: []v1alpha1.Weekday{v1alpha1.Monday}, Start: "00:00", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Mars/Olympus_Mons"},
		}
	})
	cfg := "rendered-badzone-1"
	f.layer(cfg, image('b'))
	startControllerWithClock(t, clocktesting.NewFakePassiveClock(berlin(t, "2026-11-25T12:00:00+01:00")))

	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonInvalidMaintenanceWindow,
		`spec.maintenanceWindows[1].timeZone: unknown time zone "Mars/Olympus_Mons"`)
	f.waitPoolEvent("Warning", v1alpha1.ReasonInvalidMaintenanceWindow, "Mars/Olympus_Mons")
	if got := f.taken(cfg, image('b')); len(got) != 0 {
		t.Fatalf("taken %v with an unreadable window", got)
	}
	if w := f.poolObj().Status.MaintenanceWindow; w != nil {
		t.Errorf("maintenanceWindow %+v, want none while the windows cannot be read", *w)
	}

	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := f.poolObj()
		p.Spec.MaintenanceWindows[1].TimeZone = "Europe/Berlin"
		return env.Client.Update(context.Background(), p)
	}))
	f.waitTaken(cfg, image('b'), 1)
}
