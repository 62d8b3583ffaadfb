package render

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/degraded"
)

// maxRetry is the tests' bound on the wait between two tries, short so
// that a healed failure is seen within the deadlines.
const maxRetry = 2 * time.Second

// listFaults is the manager's client whose List of MachineConfigs fails
// while broken, as a cache or an API server that does not answer does.
type listFaults struct {
	client.Client
	mu     sync.Mutex
	broken bool
}

func (c *listFaults) set(broken bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broken = broken
}

func (c *listFaults) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.mu.Lock()
	broken := c.broken
	c.mu.Unlock()
	if _, ok := list.(*v1alpha1.MachineConfigList); ok && broken {
		return apierrors.NewServiceUnavailable("injected by the test: no answer")
	}
	return c.Client.List(ctx, list, opts...)
}

// renderDegradedRetrying reads the pool's RenderDegraded condition:
// Retrying with status, its message telling the error and a next try
// that is soon, or an error saying what it is instead.
func renderDegradedRetrying(t *testing.T, pool string, status metav1.ConditionStatus) error {
	const marker = "; trying again at "
	c := meta.FindStatusCondition(getPool(t, pool).Status.Conditions, v1alpha1.PoolRenderDegraded)
	if c == nil || c.Status != status || c.Reason != v1alpha1.ReasonRetrying || !strings.Contains(c.Message, "list MachineConfigs: injected by the test") {
		return fmt.Errorf("RenderDegraded %v; want %s/%s", c, status, v1alpha1.ReasonRetrying)
	}
	i := strings.Index(c.Message, marker)
	if i < 0 {
		return fmt.Errorf("message %q tells no next try", c.Message)
	}
	at, err := time.Parse(time.RFC3339, c.Message[i+len(marker):])
	if err != nil {
		return fmt.Errorf("message %q: %w", c.Message, err)
	}
	if d := time.Until(at); d > maxRetry {
		t.Errorf("next try at %s, %s from now: over the bound %s", at, d, maxRetry)
	}
	return nil
}

// TestFailedListSaysRetryingAndRecovers: the MachineConfigs cannot be
// listed. The pool says so, and when it tries again; once the list works,
// the next try (no event brings it) renders. A failure later keeps what
// was known: a pool degraded by an invalid MachineConfig stays degraded.
func TestFailedListSaysRetryingAndRecovers(t *testing.T) {
	c := &listFaults{broken: true}
	env.StartManager(t, ctrl.Options{}, func(mgr ctrl.Manager) error {
		c.Client = mgr.GetClient()
		if err := (&Reconciler{Client: c, Recorder: mgr.GetEventRecorder("strata-render"), MaxRetryDelay: maxRetry}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&degraded.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
	labels := map[string]string{"rretry": "true"}
	newPool(t, "rretry", labels)
	newMC(t, "rretry-00-good", labels, map[string]string{"/etc/good": "1"})

	// Never rendered: nothing says whether its input is good.
	eventually(t, "RenderDegraded says Retrying", func() error { return renderDegradedRetrying(t, "rretry", metav1.ConditionUnknown) })
	if name := getPool(t, "rretry").Status.Configuration.Name; name != "" {
		t.Errorf("configuration %q while the MachineConfigs cannot be listed", name)
	}
	c.set(false)
	good := waitRendered(t, "rretry", "rretry-00-good")

	bad := newMC(t, "rretry-50-bad", labels, map[string]string{"/proc/sys/kernel/panic": "1"})
	eventually(t, "RenderDegraded names the bad MachineConfig", func() error {
		if c := meta.FindStatusCondition(getPool(t, "rretry").Status.Conditions, v1alpha1.PoolRenderDegraded); c == nil ||
			c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "rretry-50-bad") {
			return fmt.Errorf("RenderDegraded %v", c)
		}
		return nil
	})
	waitDegraded(t, "rretry", metav1.ConditionTrue, "while a MachineConfig is invalid")

	// A change to the bad one, while the list fails: still degraded.
	c.set(true)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(bad), bad); err != nil {
		t.Fatal(err)
	}
	bad.Spec.Config = fileConfig(map[string]string{"/proc/sys/kernel/panic": "2"})
	if err := env.Client.Update(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	eventually(t, "RenderDegraded says Retrying, still True", func() error { return renderDegradedRetrying(t, "rretry", metav1.ConditionTrue) })
	p := getPool(t, "rretry")
	if d := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PoolDegraded); d == nil || d.Status != metav1.ConditionTrue {
		t.Errorf("Degraded %v while retrying a pool known to be degraded", d)
	}
	if p.Status.Configuration.Name != good.Name {
		t.Errorf("configuration %s, want %s kept", p.Status.Configuration.Name, good.Name)
	}

	c.set(false)
	eventually(t, "RenderDegraded names the bad MachineConfig again", func() error {
		if c := meta.FindStatusCondition(getPool(t, "rretry").Status.Conditions, v1alpha1.PoolRenderDegraded); c == nil ||
			c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonInvalidConfig || !strings.Contains(c.Message, "rretry-50-bad") {
			return fmt.Errorf("RenderDegraded %v", c)
		}
		return nil
	})
}
