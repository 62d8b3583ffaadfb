package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/degraded"
	"github.com/strata-dev/strata/test/testenv"
)

// maxRetry is the tests' bound on the wait between two tries, short so
// that a healed failure is seen within the deadlines.
const maxRetry = 2 * time.Second

// faultyClient is the manager's client with failures injected: while a
// call is broken (a MachineOSBuild's get, a Node's patch, by name), it
// fails as a call to an API server that did not answer does. Every other
// call, and every call once healed, is the real client's.
type faultyClient struct {
	client.Client
	mu     sync.Mutex
	broken map[string]bool
}

func (c *faultyClient) set(call string, broken bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = map[string]bool{}
	}
	c.broken[call] = broken
}

func (c *faultyClient) fault(call string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken[call] {
		return apierrors.NewServiceUnavailable("injected by the test: no answer")
	}
	return nil
}

func (c *faultyClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.MachineOSBuild); ok {
		if err := c.fault("get build " + key.Name); err != nil {
			return err
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *faultyClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*corev1.Node); ok {
		if err := c.fault("patch node " + obj.GetName()); err != nil {
			return err
		}
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// startFaultyController runs the rollout reconciler (and the owner of
// the pool's Degraded summary) through c, which wraps the manager's
// client, with retries bounded by maxRetry.
func startFaultyController(t *testing.T, c *faultyClient) *testenv.Logs {
	t.Helper()
	logs := testenv.NewLogs(0)
	env.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: CacheByObject()}, Logger: logs.Logger()}, func(mgr ctrl.Manager) error {
		c.Client = mgr.GetClient()
		if err := (&Reconciler{Client: c, Recorder: mgr.GetEventRecorder("strata-rollout"), MaxRetryDelay: maxRetry}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&degraded.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
	return logs
}

// retryingAt reads the pool's Updated condition: Retrying, with status
// and a message holding what, or an error saying what it is instead. It
// returns the next try's time the message tells.
func (f *fixture) retryingAt(status, what string) (time.Time, error) {
	const marker = "; trying again at "
	c := condition(f.poolObj(), v1alpha1.PoolUpdated)
	if c.Reason != v1alpha1.ReasonRetrying || string(c.Status) != status || !strings.Contains(c.Message, what) {
		return time.Time{}, fmt.Errorf("Updated is %s/%s %q; want %s/%s containing %q", c.Status, c.Reason, c.Message, status, v1alpha1.ReasonRetrying, what)
	}
	i := strings.Index(c.Message, marker)
	if i < 0 {
		return time.Time{}, fmt.Errorf("message %q tells no next try", c.Message)
	}
	rest := c.Message[i+len(marker):]
	if j := strings.Index(rest, ";"); j >= 0 {
		rest = rest[:j]
	}
	at, err := time.Parse(time.RFC3339, rest)
	if err != nil {
		return time.Time{}, fmt.Errorf("message %q: next try %q: %w", c.Message, rest, err)
	}
	return at, nil
}

// waitRetrying waits for retryingAt to find the condition, checks that
// the next try is soon, and returns its time.
func (f *fixture) waitRetrying(status, what string) time.Time {
	f.t.Helper()
	var at time.Time
	eventually(f.t, "pool "+f.pool+" Updated says Retrying", func() error {
		var err error
		at, err = f.retryingAt(status, what)
		return err
	})
	// The message's time is up to a second early (RFC3339 drops the
	// fraction); the condition was read after the write.
	if d := time.Until(at); d > maxRetry {
		f.t.Errorf("next try at %s, %s from now: over the bound %s", at, d, maxRetry)
	}
	return at
}

// TestFailedReadSaysRetryingAndRecovers: the pool's build cannot be read
// (the API server does not answer). The pool says so, and when it tries
// again, before it has ever planned; once the read works, the next try
// (no event brings it) rolls out.
func TestFailedReadSaysRetryingAndRecovers(t *testing.T) {
	f := newFixture(t, "retryread", 1, nil)
	cfg := "rendered-retryread-1"
	f.layer(cfg, image('a'))
	c := &faultyClient{}
	c.set("get build retryread-"+cfg, true)
	logs := startFaultyController(t, c)

	// Nothing was planned, so nothing says whether the nodes are updated.
	f.waitRetrying("Unknown", "get build retryread-"+cfg)
	logs.Wait(t, timeout, "Reconcile failed; trying again", map[string]string{"name": "retryread"})
	f.assertNoneTaken(cfg, image('a'), "the build could not be read")

	c.set("get build retryread-"+cfg, false)
	f.waitTaken(cfg, image('a'), 1)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut, "0 of 1 nodes run "+cfg)
	f.finish("retryread-0")
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "All 1 nodes run "+cfg)

	// Once it has planned, a failed read keeps the status last known. A
	// node's annotation brings a reconcile.
	c.set("get build retryread-"+cfg, true)
	f.annotate("retryread-0", "example.com/poke", "1")
	first := f.waitRetrying("True", "get build retryread-"+cfg)
	// The tries go on, each told, and no event brings them.
	eventually(t, "a later try told", func() error {
		at, err := f.retryingAt("True", "get build retryread-"+cfg)
		if err == nil && !at.After(first) {
			err = fmt.Errorf("next try still at %s", at)
		}
		return err
	})
	c.set("get build retryread-"+cfg, false)
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "All 1 nodes run "+cfg)
}

// TestFailedNodeWriteSaysRetryingAndRecovers: the node the plan takes
// cannot be written. The pool says so in Updated, with the next try, and
// not as a node that failed its update; once the write works, the node
// is taken.
func TestFailedNodeWriteSaysRetryingAndRecovers(t *testing.T) {
	f := newFixture(t, "retrypatch", 2, nil)
	cfg := "rendered-retrypatch-1"
	f.layer(cfg, image('c'))
	c := &faultyClient{}
	c.set("patch node retrypatch-0", true)
	startFaultyController(t, c)

	f.waitRetrying("False", "set the desired state of node retrypatch-0")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRetrying, "; 0 of 2 nodes run "+cfg)
	if nd := condition(f.poolObj(), v1alpha1.PoolNodeDegraded); nd.Status != "False" {
		t.Errorf("NodeDegraded is %s/%s %q: no node failed its update", nd.Status, nd.Reason, nd.Message)
	}
	f.assertNoneTaken(cfg, image('c'), "the node could not be written")

	c.set("patch node retrypatch-0", false)
	if got := f.waitTaken(cfg, image('c'), 1); got[0] != "retrypatch-0" {
		t.Errorf("taken %v, want retrypatch-0", got)
	}
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut, "0 of 2 nodes run "+cfg)
}
