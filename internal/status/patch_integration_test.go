package status_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/status"
	"github.com/strata-dev/strata/test/testenv"
)

// A controller computes a MachineOSBuild's conditions from its cached copy;
// a merge patch replaces the whole conditions list. An approver's
// ImageApproved condition written after that copy was read must survive:
// Patch refuses to write over it (a conflict, so the reconcile runs again
// on the fresh object), and a patch from the fresh object keeps it.
func TestPatchNeverDropsAConditionSomeoneElseWrote(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	b := &v1alpha1.MachineOSBuild{
		ObjectMeta: metav1.ObjectMeta{Name: "approved-build"},
		Spec: v1alpha1.MachineOSBuildSpec{
			MachineConfig:         v1alpha1.LocalObjectReference{Name: "rendered-worker-1"},
			MachineOSConfig:       v1alpha1.LocalObjectReference{Name: "worker"},
			RenderedImagePushSpec: "registry.example.com/os:worker",
		},
	}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildBuilding, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBuildRunning, Message: "running"})
	if err := c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	stale := b.DeepCopy()

	// The approver writes, through the status subresource.
	fresh := &v1alpha1.MachineOSBuild{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), fresh); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&fresh.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildImageApproved, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApproved, Message: "scanner: no findings"})
	if err := c.Status().Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}

	// The controller, from its stale copy.
	next := stale.DeepCopy()
	meta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildBuilding, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonBuildSucceeded, Message: "done"})
	err := status.Patch(ctx, c, stale, next)
	if !apierrors.IsConflict(err) {
		t.Errorf("patch from a stale copy: err %v, want a conflict", err)
	}
	approved := func(when string) {
		t.Helper()
		got := &v1alpha1.MachineOSBuild{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
			t.Fatal(err)
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.BuildImageApproved) {
			t.Errorf("%s: ImageApproved is gone: %+v", when, got.Status.Conditions)
		}
	}
	approved("after a patch from a stale copy")

	// The retry, from the fresh object, keeps the approver's condition.
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), fresh); err != nil {
		t.Fatal(err)
	}
	next = fresh.DeepCopy()
	meta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildBuilding, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonBuildSucceeded, Message: "done"})
	if err := status.Patch(ctx, c, fresh, next); err != nil {
		t.Fatal(err)
	}
	approved("after a patch from the fresh object")
}
