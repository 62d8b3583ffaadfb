package window

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// MaxDuration is the longest a window may stay open; the CRD enforces it
// too. Longer than a week would overlap the window's own next opening.
const MaxDuration = 7 * 24 * time.Hour

// startPattern is the CRD's pattern for start, checked again here so that
// a pool written past the CRD (an older schema) cannot mislead the parse.
var startPattern = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)

// Window is one parsed maintenance window.
type Window struct {
	Days         []time.Weekday
	Hour, Minute int
	Duration     time.Duration
	Location     *time.Location
}

// Schedule is a pool's windows. An empty Schedule is always open.
type Schedule []Window

// State is a schedule's state at an instant.
type State struct {
	// Open says whether a window is open.
	Open bool
	// ClosesAt, when Open, is when the open (merged) window closes; zero
	// if it never does (windows that chain into each other forever, or
	// no windows at all).
	ClosesAt time.Time
	// NextOpensAt is when a window next opens after the instant (after
	// ClosesAt, when Open); zero if never, which only an always-open
	// schedule has.
	NextOpensAt time.Time
}

// Transition is the next instant the state changes, zero if never.
func (s State) Transition() time.Time {
	if s.Open {
		return s.ClosesAt
	}
	return s.NextOpensAt
}

var dayNames = map[v1alpha1.Weekday]time.Weekday{
	v1alpha1.Monday: time.Monday, v1alpha1.Tuesday: time.Tuesday, v1alpha1.Wednesday: time.Wednesday,
	v1alpha1.Thursday: time.Thursday, v1alpha1.Friday: time.Friday, v1alpha1.Saturday: time.Saturday,
	v1alpha1.Sunday: time.Sunday,
}

// Parse turns a pool's maintenanceWindows into a Schedule. The CRD
// validates the shape; the time zone can only be checked here (the
// embedded or system tzdata), so an error names the field, for example
// spec.maintenanceWindows[1].timeZone, and the caller holds the rollout.
func Parse(specs []v1alpha1.MaintenanceWindow) (Schedule, error) {
	s := make(Schedule, 0, len(specs))
	for i, w := range specs {
		field := fmt.Sprintf("spec.maintenanceWindows[%d]", i)
		var out Window
		for _, d := range w.Days {
			wd, ok := dayNames[d]
			if !ok {
				return nil, fmt.Errorf("%s.days: unknown day %q", field, d)
			}
			out.Days = append(out.Days, wd)
		}
		if len(out.Days) == 0 {
			return nil, fmt.Errorf("%s.days: no day", field)
		}
		if !startPattern.MatchString(w.Start) {
			return nil, fmt.Errorf("%s.start: %q is not a time of day HH:MM", field, w.Start)
		}
		out.Hour = int(w.Start[0]-'0')*10 + int(w.Start[1]-'0')
		out.Minute = int(w.Start[3]-'0')*10 + int(w.Start[4]-'0')
		out.Duration = w.Duration.Duration
		if out.Duration <= 0 || out.Duration > MaxDuration {
			return nil, fmt.Errorf("%s.duration: %s is not more than 0 and at most %s", field, out.Duration, MaxDuration)
		}
		zone := w.TimeZone
		if zone == "" {
			zone = "UTC"
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return nil, fmt.Errorf("%s.timeZone: unknown time zone %q", field, zone)
		}
		out.Location = loc
		s = append(s, out)
	}
	return s, nil
}

// span is one opening of a window: [from, to).
type span struct{ from, to time.Time }

// horizon bounds how far around an instant openings are generated. Every
// window opens at least once a week and lasts at most a week, so a span
// that contains t starts after t-8d, and merged spans that reach past
// t+horizon-8d chain on forever (the pattern repeats weekly).
const horizon = 22 * 24 * time.Hour

// At is the schedule's state at t.
func (s Schedule) At(t time.Time) State {
	if len(s) == 0 {
		return State{Open: true}
	}
	from, to := t.Add(-8*24*time.Hour), t.Add(horizon)
	var spans []span
	for _, w := range s {
		spans = append(spans, w.openings(from, to)...)
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	merged := spans[:0:0]
	for _, sp := range spans {
		if n := len(merged); n > 0 && !sp.from.After(merged[n-1].to) {
			if sp.to.After(merged[n-1].to) {
				merged[n-1].to = sp.to
			}
			continue
		}
		merged = append(merged, sp)
	}
	// A merged span reaching the end of the horizon may chain on: treat
	// it as endless.
	forever := to.Add(-8 * 24 * time.Hour)
	var st State
	for i, sp := range merged {
		if sp.to.After(t) && !sp.from.After(t) {
			st.Open = true
			if sp.to.Before(forever) {
				st.ClosesAt = sp.to
				if i+1 < len(merged) {
					st.NextOpensAt = merged[i+1].from
				}
			}
			return st
		}
		if sp.from.After(t) {
			st.NextOpensAt = sp.from
			return st
		}
	}
	return st
}

// openings lists the window's spans that start on a local date from the
// date of from to the date of to.
func (w Window) openings(from, to time.Time) []span {
	var out []span
	y, m, d := from.In(w.Location).Date()
	for day := time.Date(y, m, d, 12, 0, 0, 0, w.Location); !day.After(to.Add(24 * time.Hour)); day = day.AddDate(0, 0, 1) {
		if !slices.Contains(w.Days, day.Weekday()) {
			continue
		}
		open := wallClock(day.Year(), day.Month(), day.Day(), w.Hour, w.Minute, w.Location)
		out = append(out, span{from: open, to: open.Add(w.Duration)})
	}
	return out
}

// wallClock is the first instant whose wall clock in loc reads the given
// date and time; if none does (a daylight-saving gap), the first instant
// after the gap. time.Date leaves both cases unspecified, so the offsets
// on either side are tried explicitly. Real zones change offset at most
// once within a day, which the ±12h probe relies on.
func wallClock(y int, mo time.Month, d, h, mi int, loc *time.Location) time.Time {
	naive := time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
	var best, latest time.Time
	for _, probe := range []time.Duration{-12 * time.Hour, 12 * time.Hour} {
		_, off := naive.Add(probe).In(loc).Zone()
		c := naive.Add(-time.Duration(off) * time.Second)
		if c.After(latest) {
			latest = c
		}
		l := c.In(loc)
		if l.Year() == y && l.Month() == mo && l.Day() == d && l.Hour() == h && l.Minute() == mi {
			if best.IsZero() || c.Before(best) {
				best = c
			}
		}
	}
	if !best.IsZero() {
		return best
	}
	// In the gap: read with the offset before the change, the wall clock
	// lands after the gap, in the zone that began at the transition.
	start, _ := latest.In(loc).ZoneBounds()
	return start
}
