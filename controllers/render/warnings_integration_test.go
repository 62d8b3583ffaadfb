package render

import (
	"context"
	"fmt"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// An Ignition 2.x leftover that OpenShift accepts with a warning
// (filesystem: root on a file) renders, and the pool says so in its
// RenderDegraded=False condition and a Warning Event, naming the
// MachineConfig and the field: someone who applied it with kubectl hears
// what stratactl render would have told them.
func TestLeftoversRenderWithAWarning(t *testing.T) {
	startController(t, 0)
	labels := map[string]string{"leftover": "true"}
	newPool(t, "leftover", labels)
	mc := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "leftover-50-root-fs", Labels: labels},
		Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
			`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/leftover.conf","contents":{"source":"data:,x"}}]}}`)}},
	}
	if err := env.Client.Create(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
	waitRendered(t, "leftover", mc.Name)
	want := "MachineConfig leftover-50-root-fs: spec.config.storage.files[0].filesystem"
	eventually(t, "RenderDegraded False/RenderedWithWarnings naming the field", func() error {
		c := meta.FindStatusCondition(getPool(t, "leftover").Status.Conditions, v1alpha1.PoolRenderDegraded)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonRenderedWithWarnings || !strings.Contains(c.Message, want) {
			return fmt.Errorf("RenderDegraded %+v", c)
		}
		return nil
	})
	eventually(t, "a Warning Event on the pool naming the field", func() error {
		var events eventsv1.EventList
		if err := env.Client.List(context.Background(), &events); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "leftover" && e.Type == "Warning" && e.Reason == v1alpha1.ReasonRenderedWithWarnings && strings.Contains(e.Note, want) {
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(events.Items))
	})
	// Degraded stays False: a warning is not a failure.
	waitDegraded(t, "leftover", metav1.ConditionFalse, "with only a warning")
}
