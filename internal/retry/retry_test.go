package retry

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBackoffDoublesUpToTheLimitAndForgets(t *testing.T) {
	var b Backoff
	var got []time.Duration
	for range 8 {
		got = append(got, b.Next("a", 10*time.Second))
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
	if d := b.Next("other", 10*time.Second); d != First {
		t.Errorf("another object waits %s, want %s", d, First)
	}
	b.Forget("a")
	if d := b.Next("a", 10*time.Second); d != First {
		t.Errorf("after Forget: %s, want %s", d, First)
	}
	if d := b.Next("small", 100*time.Millisecond); d != 100*time.Millisecond {
		t.Errorf("a limit under the first wait: %s", d)
	}
	var unset Backoff
	for range 20 {
		if d := unset.Next("x", 0); d > DefaultMaxDelay {
			t.Fatalf("no limit given: waits %s, over %s", d, DefaultMaxDelay)
		}
	}
	if d := unset.Next("x", 0); d != DefaultMaxDelay {
		t.Errorf("no limit given: waits %s at last, want %s", d, DefaultMaxDelay)
	}
}

func TestAttemptMessage(t *testing.T) {
	var b Backoff
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	a := b.Fail("p", errors.New("list nodes of pool p: timeout"), time.Minute, now)
	if a.After != First || !a.At.Equal(now.Add(First)) {
		t.Errorf("attempt %+v", a)
	}
	if got, want := a.Message(), "list nodes of pool p: timeout; trying again at 2026-03-01T11:00:00Z"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	long := b.Fail("p", errors.New(strings.Repeat("x", 10*maxError)), time.Minute, now)
	if n := len(long.Message()); n > maxError+len("; trying again at 2026-03-01T11:00:00Z") {
		t.Errorf("a long error makes a message of %d bytes", n)
	}
}
