package build

import (
	"testing"
	"time"
)

func TestBackoffDoublesUpToTheLimitAndForgets(t *testing.T) {
	var b backoff
	var got []time.Duration
	for range 8 {
		got = append(got, b.next("a", 10*time.Second))
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
	if d := b.next("other", 10*time.Second); d != firstRetry {
		t.Errorf("another MachineOSConfig waits %s, want %s", d, firstRetry)
	}
	b.forget("a")
	if d := b.next("a", 10*time.Second); d != firstRetry {
		t.Errorf("after forget: %s, want %s", d, firstRetry)
	}
	if d := b.next("small", 100*time.Millisecond); d != 100*time.Millisecond {
		t.Errorf("a limit under the first wait: %s", d)
	}
}
