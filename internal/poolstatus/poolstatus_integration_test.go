package poolstatus_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/poolstatus"
	"github.com/strata-dev/strata/test/testenv"
)

func cond(t, status, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: reason}
}

// Three controllers write one pool's status, each from its own (possibly
// stale) copy. Each applies only its share: none is refused for a
// conflict, none drops or overwrites another's fields, a condition a share
// stops setting is removed, and an unchanged share costs no write.
func TestSharesNeverClobberEachOther(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "shared"}}))
	stale := &v1alpha1.MachineConfigPool{}
	must(c.Get(ctx, client.ObjectKey{Name: "shared"}, stale))

	// The render controller, then the rollout and the build controllers,
	// all from the copy read before any of them wrote.
	r := stale.DeepCopy()
	r.Status.Configuration.Name = "rendered-shared-1"
	meta.SetStatusCondition(&r.Status.Conditions, cond(v1alpha1.PoolRenderDegraded, "False", v1alpha1.ReasonRendered))
	must(poolstatus.Render.Apply(ctx, c, stale, r))
	o := stale.DeepCopy()
	o.Status.MachineCount, o.Status.UpdatedMachineCount = 3, 1
	meta.SetStatusCondition(&o.Status.Conditions, cond(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut))
	must(poolstatus.Rollout.Apply(ctx, c, stale, o))
	b := stale.DeepCopy()
	meta.SetStatusCondition(&b.Status.Conditions, cond(v1alpha1.PoolImageBuildDegraded, "True", v1alpha1.ReasonMissingSecret))
	must(poolstatus.Build.Apply(ctx, c, stale, b))

	got := &v1alpha1.MachineConfigPool{}
	must(c.Get(ctx, client.ObjectKey{Name: "shared"}, got))
	if got.Status.Configuration.Name != "rendered-shared-1" || got.Status.MachineCount != 3 || got.Status.UpdatedMachineCount != 1 {
		t.Errorf("status %+v lost a share's fields", got.Status)
	}
	for _, ty := range []string{v1alpha1.PoolRenderDegraded, v1alpha1.PoolUpdated, v1alpha1.PoolImageBuildDegraded} {
		if meta.FindStatusCondition(got.Status.Conditions, ty) == nil {
			t.Errorf("condition %s lost; conditions %v", ty, got.Status.Conditions)
		}
	}

	// The build controller lets the pool go: its condition goes, the
	// others stay.
	released := got.DeepCopy()
	meta.RemoveStatusCondition(&released.Status.Conditions, v1alpha1.PoolImageBuildDegraded)
	must(poolstatus.Build.Apply(ctx, c, got, released))
	must(c.Get(ctx, client.ObjectKey{Name: "shared"}, got))
	if meta.FindStatusCondition(got.Status.Conditions, v1alpha1.PoolImageBuildDegraded) != nil {
		t.Error("ImageBuildDegraded stays after the build controller stopped setting it")
	}
	if len(got.Status.Conditions) != 2 {
		t.Errorf("conditions %v, want RenderDegraded and Updated", got.Status.Conditions)
	}

	// Nothing of the rollout's share changed: no write.
	same := got.DeepCopy()
	same.Status.Configuration.Name = "not the rollout's"
	must(poolstatus.Rollout.Apply(ctx, c, got, same))
	again := &v1alpha1.MachineConfigPool{}
	must(c.Get(ctx, client.ObjectKey{Name: "shared"}, again))
	if again.ResourceVersion != got.ResourceVersion || again.Status.Configuration.Name != "rendered-shared-1" {
		t.Errorf("an unchanged share wrote the pool (resourceVersion %s -> %s, configuration %q)",
			got.ResourceVersion, again.ResourceVersion, again.Status.Configuration.Name)
	}
}

func TestDegraded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		conds  []metav1.Condition
		status metav1.ConditionStatus
		reason string
	}{
		{"nothing reported", nil, metav1.ConditionFalse, v1alpha1.ReasonAsExpected},
		{"all fine", []metav1.Condition{cond(v1alpha1.PoolRenderDegraded, "False", "x"), cond(v1alpha1.PoolNodeDegraded, "False", "y")}, metav1.ConditionFalse, v1alpha1.ReasonAsExpected},
		{"one part", []metav1.Condition{cond(v1alpha1.PoolNodeDegraded, "True", "y")}, metav1.ConditionTrue, v1alpha1.PoolNodeDegraded},
		{"two parts, in a fixed order", []metav1.Condition{cond(v1alpha1.PoolNodeDegraded, "True", "y"), cond(v1alpha1.PoolRenderDegraded, "True", "x")},
			metav1.ConditionTrue, v1alpha1.PoolRenderDegraded + "And" + v1alpha1.PoolNodeDegraded},
		{"other conditions do not count", []metav1.Condition{cond(v1alpha1.PoolUpdated, "True", "z")}, metav1.ConditionFalse, v1alpha1.ReasonAsExpected},
	} {
		p := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Generation: 4}, Status: v1alpha1.MachineConfigPoolStatus{Conditions: tc.conds}}
		got := poolstatus.Degraded(p)
		if got.Status != tc.status || got.Reason != tc.reason || got.ObservedGeneration != 4 || got.Type != v1alpha1.PoolDegraded {
			t.Errorf("%s: Degraded = %+v, want %s/%s", tc.name, got, tc.status, tc.reason)
		}
	}
}
