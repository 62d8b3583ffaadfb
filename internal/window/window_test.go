package window

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func win(zone, start string, d time.Duration, days ...v1alpha1.Weekday) v1alpha1.MaintenanceWindow {
	return v1alpha1.MaintenanceWindow{Days: days, Start: start, Duration: metav1.Duration{Duration: d}, TimeZone: zone}
}

// at parses a local wall-clock time with its offset, as RFC 3339.
func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAt(t *testing.T) {
	const (
		mon, tue, wed, thu, fri, sat, sun = v1alpha1.Monday, v1alpha1.Tuesday, v1alpha1.Wednesday, v1alpha1.Thursday,
			v1alpha1.Friday, v1alpha1.Saturday, v1alpha1.Sunday
	)
	for _, tc := range []struct {
		name    string
		windows []v1alpha1.MaintenanceWindow
		now     string
		open    bool
		closes  string // "" when zero
		next    string // "" when zero
	}{
		{name: "no windows: always open", now: "2026-03-29T02:30:00+02:00", open: true},
		{
			name:    "before a weekday window",
			windows: []v1alpha1.MaintenanceWindow{win("UTC", "02:00", 4*time.Hour, tue, thu)},
			now:     "2026-11-24T01:59:59Z", // Tuesday
			next:    "2026-11-24T02:00:00Z",
		},
		{
			name:    "at the opening instant: open",
			windows: []v1alpha1.MaintenanceWindow{win("UTC", "02:00", 4*time.Hour, tue, thu)},
			now:     "2026-11-24T02:00:00Z",
			open:    true, closes: "2026-11-24T06:00:00Z", next: "2026-11-26T02:00:00Z",
		},
		{
			name:    "at the closing instant: closed, next on Thursday",
			windows: []v1alpha1.MaintenanceWindow{win("UTC", "02:00", 4*time.Hour, tue, thu)},
			now:     "2026-11-24T06:00:00Z",
			next:    "2026-11-26T02:00:00Z",
		},
		{
			name:    "crossing midnight: Sunday 22:00 for 4h is open on Monday 01:00",
			windows: []v1alpha1.MaintenanceWindow{win("Europe/Berlin", "22:00", 4*time.Hour, sun)},
			now:     "2026-11-23T01:00:00+01:00", // Monday
			open:    true, closes: "2026-11-23T02:00:00+01:00", next: "2026-11-29T22:00:00+01:00",
		},
		{
			name:    "crossing midnight: the day is the start's, Monday's own window is not Sunday's",
			windows: []v1alpha1.MaintenanceWindow{win("Europe/Berlin", "22:00", 4*time.Hour, mon)},
			now:     "2026-11-23T01:00:00+01:00", // Monday 01:00: Sunday has no window
			next:    "2026-11-23T22:00:00+01:00",
		},
		{
			name:    "end of the week: Saturday 23:00 for 3h open on Sunday 01:30",
			windows: []v1alpha1.MaintenanceWindow{win("America/New_York", "23:00", 3*time.Hour, sat)},
			now:     "2026-11-29T01:30:00-05:00",
			open:    true, closes: "2026-11-29T02:00:00-05:00", next: "2026-12-05T23:00:00-05:00",
		},
		{
			name:    "end of the week: Sunday late, next is Saturday",
			windows: []v1alpha1.MaintenanceWindow{win("America/New_York", "23:00", 3*time.Hour, sat)},
			now:     "2026-11-29T23:30:00-05:00",
			next:    "2026-12-05T23:00:00-05:00",
		},
		{
			name:    "spring forward Berlin: 02:30 does not exist, opens at 03:00 CEST",
			windows: []v1alpha1.MaintenanceWindow{win("Europe/Berlin", "02:30", 2*time.Hour, sun)},
			now:     "2026-03-29T01:59:00+01:00",
			next:    "2026-03-29T03:00:00+02:00",
		},
		{
			name:    "spring forward Berlin: open just after the gap, two elapsed hours",
			windows: []v1alpha1.MaintenanceWindow{win("Europe/Berlin", "02:30", 2*time.Hour, sun)},
			now:     "2026-03-29T03:00:00+02:00",
			open:    true, closes: "2026-03-29T05:00:00+02:00", next: "2026-04-05T02:30:00+02:00",
		},
		{
			name:    "spring forward Berlin: duration is elapsed time, 01:00 for 4h closes 06:00 CEST",
			windows: []v1alpha1.MaintenanceWindow{win("Europe/Berlin", "01:00", 4*time.Hour, sun)},
			now:     "2026-03-29T05:59:00+02:00",
			open:    true, closes: "2026-03-29T06:00:00+02:00", next: "2026-04-05T01:00:00+02:00",
		},
		{
			name:    "fall back Berlin: 02:30 occurs twice, opens at the first",
			windows: []v1alpha1.MaintenanceWindow{win("Europe/Berlin", "02:30", 30*time.Minute, sun)},
			now:     "2026-10-25T02:40:00+02:00",
			open:    true, closes: "2026-10-25T02:00:00+01:00", next: "2026-11-01T02:30:00+01:00",
		},
		{
			name:    "fall back Berlin: the second 02:40 is after the window",
			windows: []v1alpha1.MaintenanceWindow{win("Europe/Berlin", "02:30", 30*time.Minute, sun)},
			now:     "2026-10-25T02:40:00+01:00",
			next:    "2026-11-01T02:30:00+01:00",
		},
		{
			name:    "fall back Berlin: 01:00 for 4h closes at 04:00 CET",
			windows: []v1alpha1.MaintenanceWindow{win("Europe/Berlin", "01:00", 4*time.Hour, sun)},
			now:     "2026-10-25T03:59:00+01:00",
			open:    true, closes: "2026-10-25T04:00:00+01:00", next: "2026-11-01T01:00:00+01:00",
		},
		{
			name:    "spring forward New York: 02:00 does not exist, opens at 03:00 EDT",
			windows: []v1alpha1.MaintenanceWindow{win("America/New_York", "02:00", time.Hour, sun)},
			now:     "2026-03-08T01:30:00-05:00",
			next:    "2026-03-08T03:00:00-04:00",
		},
		{
			name:    "the week after a DST change keeps the wall clock",
			windows: []v1alpha1.MaintenanceWindow{win("America/New_York", "01:30", time.Hour, sun)},
			now:     "2026-03-02T12:00:00-05:00", // Monday before the change
			next:    "2026-03-08T01:30:00-05:00",
		},
		{
			name:    "fall back New York: 01:30 occurs twice, the first",
			windows: []v1alpha1.MaintenanceWindow{win("America/New_York", "01:30", time.Hour, sun)},
			now:     "2026-10-31T12:00:00-04:00",
			next:    "2026-11-01T01:30:00-04:00",
		},
		{
			name: "overlapping windows merge: open until the later closes",
			windows: []v1alpha1.MaintenanceWindow{
				win("UTC", "01:00", 2*time.Hour, wed),
				win("UTC", "02:00", 3*time.Hour, wed),
			},
			now:  "2026-11-25T01:30:00Z",
			open: true, closes: "2026-11-25T05:00:00Z", next: "2026-12-02T01:00:00Z",
		},
		{
			name: "adjacent windows in different zones merge",
			windows: []v1alpha1.MaintenanceWindow{
				win("UTC", "22:00", 2*time.Hour, fri),
				win("Europe/Berlin", "01:00", 2*time.Hour, sat), // 00:00 UTC
			},
			now:  "2026-11-27T23:00:00Z",
			open: true, closes: "2026-11-28T02:00:00Z", next: "2026-12-04T22:00:00Z",
		},
		{
			name: "a gap between windows: the next is the later one",
			windows: []v1alpha1.MaintenanceWindow{
				win("UTC", "01:00", time.Hour, mon, wed),
				win("UTC", "20:00", time.Hour, tue),
			},
			now:  "2026-11-23T01:30:00Z", // Monday
			open: true, closes: "2026-11-23T02:00:00Z", next: "2026-11-24T20:00:00Z",
		},
		{
			name:    "a week-long window every day never closes",
			windows: []v1alpha1.MaintenanceWindow{win("UTC", "00:00", 168*time.Hour, mon)},
			now:     "2026-11-26T12:00:00Z",
			open:    true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.windows)
			if err != nil {
				t.Fatal(err)
			}
			got := s.At(at(t, tc.now))
			if got.Open != tc.open {
				t.Errorf("open = %v, want %v", got.Open, tc.open)
			}
			check := func(what string, got time.Time, want string) {
				t.Helper()
				if want == "" {
					if !got.IsZero() {
						t.Errorf("%s = %s, want none", what, got)
					}
					return
				}
				if w := at(t, want); !got.Equal(w) {
					t.Errorf("%s = %s, want %s", what, got.UTC().Format(time.RFC3339), w.UTC().Format(time.RFC3339))
				}
			}
			check("closesAt", got.ClosesAt, tc.closes)
			check("nextOpensAt", got.NextOpensAt, tc.next)
		})
	}
}

// TestFakeClockThroughDSTAndMidnight walks a clock in 10-minute steps
// over a week holding both DST changes' Sundays and checks that the state
// is open exactly inside the expected intervals, and that the transition
// each state announces is the next change the walk sees.
func TestFakeClockThroughDSTAndMidnight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		from  string
		spans [][2]string
	}{
		{name: "spring forward", from: "2026-03-27T00:00:00+01:00", spans: [][2]string{
			{"2026-03-27T23:00:00+01:00", "2026-03-28T03:00:00+01:00"}, // Fri 23:00 crosses midnight
			{"2026-03-28T23:00:00+01:00", "2026-03-29T04:00:00+02:00"}, // Sat 23:00 CET + 4 elapsed hours is 04:00 CEST
			{"2026-03-29T23:00:00+02:00", "2026-03-30T03:00:00+02:00"},
			{"2026-03-30T23:00:00+02:00", "2026-03-31T03:00:00+02:00"},
		}},
		{name: "fall back", from: "2026-10-23T00:00:00+02:00", spans: [][2]string{
			{"2026-10-23T23:00:00+02:00", "2026-10-24T03:00:00+02:00"},
			{"2026-10-24T23:00:00+02:00", "2026-10-25T02:00:00+01:00"}, // 4 elapsed hours end at 02:00 CET
			{"2026-10-25T23:00:00+01:00", "2026-10-26T03:00:00+01:00"},
			{"2026-10-26T23:00:00+01:00", "2026-10-27T03:00:00+01:00"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]v1alpha1.MaintenanceWindow{win("Europe/Berlin", "23:00", 4*time.Hour,
				v1alpha1.Monday, v1alpha1.Friday, v1alpha1.Saturday, v1alpha1.Sunday)})
			if err != nil {
				t.Fatal(err)
			}
			inSpan := func(now time.Time) bool {
				for _, sp := range tc.spans {
					if !now.Before(at(t, sp[0])) && now.Before(at(t, sp[1])) {
						return true
					}
				}
				return false
			}
			start := at(t, tc.from)
			end := start.Add(4 * 24 * time.Hour)
			var announced time.Time
			prev := s.At(start).Open
			for now := start; now.Before(end); now = now.Add(10 * time.Minute) {
				st := s.At(now)
				if st.Open != inSpan(now) {
					t.Fatalf("at %s open = %v, want %v", now.Format(time.RFC3339), st.Open, !st.Open)
				}
				if st.Open != prev && !announced.IsZero() && !announced.Equal(now) {
					t.Fatalf("state changed at %s, announced %s", now, announced)
				}
				prev, announced = st.Open, st.Transition()
			}
		})
	}
}

func TestParseNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		w    v1alpha1.MaintenanceWindow
		want string
	}{
		{win("Mars/Olympus_Mons", "01:00", time.Hour, v1alpha1.Monday), `spec.maintenanceWindows[1].timeZone: unknown time zone "Mars/Olympus_Mons"`},
		{win("UTC", "25:00", time.Hour, v1alpha1.Monday), "spec.maintenanceWindows[1].start"},
		{win("UTC", "1:00", time.Hour, v1alpha1.Monday), "spec.maintenanceWindows[1].start"},
		{win("UTC", "+1:00", time.Hour, v1alpha1.Monday), "spec.maintenanceWindows[1].start"},
		{win("UTC", "01:60", time.Hour, v1alpha1.Monday), "spec.maintenanceWindows[1].start"},
		{win("UTC", "01:00", 0, v1alpha1.Monday), "spec.maintenanceWindows[1].duration"},
		{win("UTC", "01:00", 169*time.Hour, v1alpha1.Monday), "spec.maintenanceWindows[1].duration"},
		{win("UTC", "01:00", time.Hour), "spec.maintenanceWindows[1].days"},
		{win("UTC", "01:00", time.Hour, "Monday"), "spec.maintenanceWindows[1].days"},
	} {
		_, err := Parse([]v1alpha1.MaintenanceWindow{win("", "00:00", time.Hour, v1alpha1.Sunday), tc.w})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%+v) = %v, want an error containing %q", tc.w, err, tc.want)
		}
	}
}

// FuzzAt checks the promises of At for any window and instant: what it
// announces lies ahead, and the state there is the announced one.
func FuzzAt(f *testing.F) {
	f.Add("Europe/Berlin", "02:30", int64(4*time.Hour), uint8(0b1000001), int64(1774746000))
	f.Add("America/New_York", "23:00", int64(30*time.Minute), uint8(0b0100000), int64(1793509200))
	f.Fuzz(func(t *testing.T, zone, start string, d int64, days uint8, unix int64) {
		var ds []v1alpha1.Weekday
		for i, name := range []v1alpha1.Weekday{v1alpha1.Sunday, v1alpha1.Monday, v1alpha1.Tuesday, v1alpha1.Wednesday,
			v1alpha1.Thursday, v1alpha1.Friday, v1alpha1.Saturday} {
			if days&(1<<i) != 0 {
				ds = append(ds, name)
			}
		}
		s, err := Parse([]v1alpha1.MaintenanceWindow{win(zone, start, time.Duration(d), ds...)})
		if err != nil {
			return
		}
		now := time.Unix(unix%(1<<34), 0)
		st := s.At(now)
		if st.Open && !st.ClosesAt.IsZero() {
			if !st.ClosesAt.After(now) || s.At(st.ClosesAt).Open {
				t.Fatalf("at %s: closes at %s, which is not ahead or not closed", now, st.ClosesAt)
			}
		}
		if !st.NextOpensAt.IsZero() {
			if !st.NextOpensAt.After(now) || !s.At(st.NextOpensAt).Open {
				t.Fatalf("at %s: opens at %s, which is not ahead or not open", now, st.NextOpensAt)
			}
		}
		if !st.Open && st.NextOpensAt.IsZero() {
			t.Fatalf("at %s: closed and never opens", now)
		}
	})
}
