// Package retry is the backoff of reconciles that failed in a way that
// may heal by itself: a cache or API read that failed, a write the API
// server did not answer. The next try's time is known when the status is
// written, so the object's condition tells a person when the controller
// tries again, and the wait stays within seconds: the work queue's own
// backoff grows to minutes and is visible nowhere.
//
// Conflicts are not failures of this kind: the caller returns them (see
// status.QuietConflict), since the next read is fresh at once.
package retry

import (
	"sync"
	"time"

	"github.com/strata-dev/strata/internal/status"
)

const (
	// First is the wait after an object's first failed reconcile; each
	// further failure in a row doubles it, up to the limit.
	First = 500 * time.Millisecond
	// DefaultMaxDelay is the limit when the controller is given none: an
	// API server back from an outage is used again within it.
	DefaultMaxDelay = 30 * time.Second
	// maxError bounds the error in a condition's message: a reconcile
	// that wrote a thousand nodes may fail a thousand times at once, and
	// the first few say what went wrong.
	maxError = 2048
)

// Backoff counts each object's failed reconciles in a row. The zero value
// is ready to use. It is memory only: a restarted controller tries
// everything at once.
type Backoff struct {
	mu       sync.Mutex
	failures map[string]int
}

// Next counts a failure of key and returns how long to wait before the
// next try: First, doubled for each failure before it in a row, at most
// limit (DefaultMaxDelay when limit is not positive).
func (b *Backoff) Next(key string, limit time.Duration) time.Duration {
	if limit <= 0 {
		limit = DefaultMaxDelay
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures == nil {
		b.failures = map[string]int{}
	}
	n := b.failures[key]
	b.failures[key] = n + 1
	d := First
	for range n {
		if d >= limit {
			break
		}
		d *= 2
	}
	return min(d, limit)
}

// Forget ends key's run of failures: its reconcile succeeded, or the
// object is gone.
func (b *Backoff) Forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.failures, key)
}

// Attempt is a failed reconcile and when it is tried again.
type Attempt struct {
	Err error
	// After is the wait, for ctrl.Result's RequeueAfter.
	After time.Duration
	// At is when the next try is, for the condition's message.
	At time.Time
}

// Fail counts a failure of key with err, made now, and says when it is
// tried again.
func (b *Backoff) Fail(key string, err error, limit time.Duration, now time.Time) *Attempt {
	d := b.Next(key, limit)
	return &Attempt{Err: err, After: d, At: now.Add(d)}
}

// Message is what a condition says of the attempt: "<error>; trying
// again at <RFC3339 time>", the error cut to a bounded length. The errors
// of API reads and writes name objects, never a Secret's content.
func (a *Attempt) Message() string {
	return status.Truncate(a.Err.Error(), maxError) + "; trying again at " + a.At.UTC().Format(time.RFC3339)
}
