package render

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// randomConfig is an Ignition config with one file of n random bytes,
// which no compression shrinks.
func randomConfig(t *testing.T, path string, n int) runtime.RawExtension {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: fmt.Appendf(nil, `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":%q,"contents":{"source":"data:;base64,%s"}}]}}`,
		path, base64.StdEncoding.EncodeToString(b))}
}

// TestTooLargeToStoreIsACondition: two MachineConfigs of 800 KiB each are
// stored, their merge cannot be. The pool says so in RenderDegraded,
// keeps its configuration and creates nothing; fewer sources render.
func TestTooLargeToStoreIsACondition(t *testing.T) {
	startController(t, 0)
	labels := map[string]string{"big": "true"}
	createBig := func(name string) {
		t.Helper()
		mc := &v1alpha1.MachineConfig{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       v1alpha1.MachineConfigSpec{Config: randomConfig(t, "/etc/"+name, 600<<10)},
		}
		if err := env.Client.Create(context.Background(), mc); err != nil {
			t.Fatalf("setup: each MachineConfig must fit: %v", err)
		}
	}
	tooLarge := func() {
		t.Helper()
		eventually(t, "RenderDegraded says the rendered config is too large", func() error {
			c := meta.FindStatusCondition(getPool(t, "big").Status.Conditions, v1alpha1.PoolRenderDegraded)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonConfigTooLarge {
				return fmt.Errorf("RenderDegraded %v", c)
			}
			for _, want := range []string{"MachineConfigs big-10-a, big-20-b", "bytes"} {
				if !strings.Contains(c.Message, want) {
					return fmt.Errorf("message %q lacks %q", c.Message, want)
				}
			}
			return nil
		})
	}
	createBig("big-10-a")
	createBig("big-20-b")
	newPool(t, "big", labels)
	// The controller's cache may see big-10-a alone first and render it:
	// what the pool keeps is checked below, from a known state.
	tooLarge()

	deleteMC(t, "big-20-b")
	first := waitRendered(t, "big", "big-10-a")

	createBig("big-20-b")
	tooLarge()
	if p := getPool(t, "big"); p.Status.Configuration.Name != first.Name {
		t.Errorf("pool moved to %q, want it to keep %s", p.Status.Configuration.Name, first.Name)
	}
	if got := renderedOf(t, "big"); !slices.Equal(got, []string{first.Name}) {
		t.Errorf("rendered configs %v, want only %s", got, first.Name)
	}
}

// TestAPIServerRefusalIsAnInputError: a rendered config that passes
// machineconfig.MaxRenderedSize but that the API server still refuses
// (a smaller etcd limit, large metadata) is the same input error, not a
// failure to retry, whichever way the refusal comes: etcd's limit, the
// gRPC message limit between the API server and etcd, or the API server's
// own limit on a request.
func TestAPIServerRefusalIsAnInputError(t *testing.T) {
	pool := newPool(t, "refused", map[string]string{"refused": "true"})
	r := &Reconciler{Client: env.Client}
	for _, size := range []int{1300 << 10, 1600 << 10, 3000 << 10} {
		name := fmt.Sprintf("rendered-refused-%d", size)
		spec := v1alpha1.MachineConfigSpec{Config: randomConfig(t, "/etc/huge", size)}
		_, err := r.ensureRendered(context.Background(), pool, name, spec, nil)
		var ie *inputError
		if !errors.As(err, &ie) || ie.reason != v1alpha1.ReasonConfigTooLarge {
			t.Errorf("%d random bytes: ensureRendered = %v, want an input error with reason %s", size, err, v1alpha1.ReasonConfigTooLarge)
			continue
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name the rendered config", err)
		}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &v1alpha1.MachineConfig{}); !apierrors.IsNotFound(err) {
			t.Errorf("get the refused config: %v, want NotFound", err)
		}
	}
}
