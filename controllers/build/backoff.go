package build

import (
	"sync"
	"time"
)

// firstRetry is the wait after a MachineOSConfig's first failed
// reconcile; each further failure in a row doubles it, up to the
// configured MaxRetryDelay.
const firstRetry = 500 * time.Millisecond

// backoff counts each MachineOSConfig's failed reconciles in a row, so
// that the next try's time is known when the status is written (the work
// queue's own backoff is neither bounded to seconds nor visible). It is
// memory only: a restarted controller tries everything at once.
type backoff struct {
	mu       sync.Mutex
	failures map[string]int
}

// next counts a failure of name and returns how long to wait.
func (b *backoff) next(name string, limit time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures == nil {
		b.failures = map[string]int{}
	}
	n := b.failures[name]
	b.failures[name] = n + 1
	d := firstRetry
	for range n {
		if d >= limit {
			break
		}
		d *= 2
	}
	return min(d, limit)
}

// forget ends name's run of failures.
func (b *backoff) forget(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.failures, name)
}
