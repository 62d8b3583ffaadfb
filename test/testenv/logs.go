package testenv

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Logs keeps what a logger wrote, one decoded JSON entry a line, for tests
// of what a controller tells its operators. Give Logger() to the manager
// (ctrl.Options.Logger): every reconciler's log.FromContext logs there.
type Logs struct {
	mu      sync.Mutex
	entries []map[string]any
	logger  logr.Logger
}

// NewLogs records entries up to verbosity v (1 keeps V(1) detail too).
func NewLogs(v int) *Logs {
	l := &Logs{}
	l.logger = funcr.NewJSON(func(obj string) {
		var e map[string]any
		if err := json.Unmarshal([]byte(obj), &e); err != nil {
			e = map[string]any{"msg": "UNDECODABLE " + obj}
		}
		l.mu.Lock()
		l.entries = append(l.entries, e)
		l.mu.Unlock()
	}, funcr.Options{Verbosity: v, LogTimestamp: false})
	return l
}

// Logger is the logger whose entries l keeps.
func (l *Logs) Logger() logr.Logger { return l.logger }

// Find returns the first entry with message msg whose values include want
// (compared as text: fmt.Sprint of the decoded JSON value).
func (l *Logs) Find(msg string, want map[string]string) (map[string]any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var same []string
	for _, e := range l.entries {
		if e["msg"] != msg {
			continue
		}
		if matches(e, want) {
			return e, nil
		}
		raw, _ := json.Marshal(e)
		same = append(same, string(raw))
	}
	if len(same) == 0 {
		return nil, fmt.Errorf("no entry %q among %d", msg, len(l.entries))
	}
	return nil, fmt.Errorf("no entry %q with %v; with other values: %s", msg, want, strings.Join(same, "; "))
}

// Wait waits until Find finds an entry, and returns it.
func (l *Logs) Wait(t testing.TB, timeout time.Duration, msg string, want map[string]string) map[string]any {
	t.Helper()
	var found map[string]any
	Eventually(t, timeout, fmt.Sprintf("log %q with %v", msg, want), func() error {
		var err error
		found, err = l.Find(msg, want)
		return err
	})
	return found
}

func matches(e map[string]any, want map[string]string) bool {
	for k, v := range want {
		got, ok := e[k]
		if !ok || fmt.Sprint(got) != v {
			return false
		}
	}
	return true
}
