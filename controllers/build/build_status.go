package build

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/internal/poolstatus"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/retry"
	"github.com/strata-dev/strata/internal/status"
)

// setConfigStatus computes the MachineOSConfig's status: the build of the
// current inputs, the image nodes should run (only ever moved forward by a
// succeeded build), and the Ready and Degraded conditions.
func setConfigStatus(s *scope) {
	mosc := s.mosc
	mosc.Status.ObservedGeneration = mosc.Generation
	ready := metav1.Condition{Type: v1alpha1.ConfigReady, Status: metav1.ConditionFalse, ObservedGeneration: mosc.Generation}
	degraded := metav1.Condition{Type: v1alpha1.ConfigDegraded, Status: metav1.ConditionFalse, ObservedGeneration: mosc.Generation,
		Reason: v1alpha1.ReasonAsExpected, Message: "The inputs can be built"}
	if s.overrides != "" {
		degraded.Reason, degraded.Message = v1alpha1.ReasonBaseOverridesOSImageURL, "The inputs can be built; "+s.overrides
	}
	switch {
	case s.problem != nil:
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, s.problem.reason, s.problem.message
		ready.Reason, ready.Message = s.problem.reason, "Nothing is built until the inputs are fixed; nodes keep their image"
	case s.waiting != "":
		ready.Reason, ready.Message = v1alpha1.ReasonNoRenderedConfig, s.waiting
	case s.build != nil:
		mosc.Status.MachineOSBuild = &v1alpha1.LocalObjectReference{Name: s.build.Name}
		b := s.build
		switch {
		case machineosbuild.IsTrue(b, v1alpha1.BuildSucceeded) && s.missing != "":
			msg := fmt.Sprintf("Image %s of build %s, which the pool's nodes are to run, is not in the registry: nodes that run it keep it, nodes that need it cannot pull it. "+
				"It is not rebuilt on its own, since a rebuilt image would be rolled out to every node again: push it back, or annotate the MachineOSConfig with %s to build it again",
				s.missing, b.Name, v1alpha1.RebuildAnnotation)
			degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, v1alpha1.ReasonCurrentImageMissing, msg
			ready.Reason, ready.Message = v1alpha1.ReasonCurrentImageMissing, "The current image "+s.missing+" is not in the registry"
		case machineosbuild.IsTrue(b, v1alpha1.BuildSucceeded):
			mosc.Status.CurrentImagePullSpec = b.Status.DigestedImagePushSpec
			ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, v1alpha1.ReasonBuildSucceeded, "Image "+b.Status.DigestedImagePushSpec+" is built from the current inputs"
		case machineosbuild.IsTrue(b, v1alpha1.BuildFailed):
			msg := "Build " + b.Name + " " + machineosbuild.FailureMessage(b.Status.Failure)
			degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, v1alpha1.ReasonBuildFailed, msg
			ready.Reason, ready.Message = v1alpha1.ReasonBuildFailed, "The newest build failed; nodes keep their image"
		case machineosbuild.IsTrue(b, v1alpha1.BuildInterrupted):
			// Its inputs are current again: the MachineOSBuild reconciler
			// starts it again as a new attempt.
			ready.Reason, ready.Message = v1alpha1.ReasonBuildRunning, "Build "+b.Name+" was interrupted and its inputs are current again: it starts again"
		default:
			ready.Reason, ready.Message = v1alpha1.ReasonBuildRunning, "Build "+b.Name+" is running"
		}
	}
	if s.retry != nil {
		// What failed and when it is tried again; an error of a registry
		// or the API server names objects and addresses, never a Secret's
		// content.
		note := (&retry.Attempt{Err: registry.Explain(s.retry.Err), At: s.retry.At}).Message()
		if ready.Status == metav1.ConditionTrue {
			ready.Message += "; a later step failed: " + note
		} else {
			ready.Reason, ready.Message = v1alpha1.ReasonRetrying, note
		}
	}
	ready.Message = status.Message(ready.Message)
	degraded.Message = status.Message(degraded.Message)
	meta.SetStatusCondition(&mosc.Status.Conditions, ready)
	meta.SetStatusCondition(&mosc.Status.Conditions, degraded)
}

// setPoolStatus sets the pool's ImageBuildDegraded condition (its share,
// poolstatus.Build) from the MachineOSConfig's Degraded condition.
func (r *Reconciler) setPoolStatus(ctx context.Context, s *scope) error {
	if s.pool == nil {
		return nil
	}
	pool := s.pool.DeepCopy()
	cond := metav1.Condition{Type: v1alpha1.PoolImageBuildDegraded, ObservedGeneration: pool.Generation}
	if d := meta.FindStatusCondition(s.mosc.Status.Conditions, v1alpha1.ConfigDegraded); d != nil && d.Status == metav1.ConditionTrue {
		cond.Status, cond.Reason = metav1.ConditionTrue, d.Reason
		cond.Message = fmt.Sprintf("MachineOSConfig %s: %s", s.mosc.Name, d.Message)
	} else {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonAsExpected, "MachineOSConfig "+s.mosc.Name+" builds"
		if s.overrides != "" {
			cond.Reason, cond.Message = v1alpha1.ReasonBaseOverridesOSImageURL, cond.Message+"; its "+s.overrides
		}
	}
	cond.Message = status.Message(cond.Message)
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
	return poolstatus.Build.Apply(ctx, r.Client, s.pool, pool)
}

// releasePools releases every pool the MachineOSConfig claimed but does
// not layer (any longer): all of them when it is being deleted, the old
// one when it moved to another pool.
func (r *Reconciler) releasePools(ctx context.Context, mosc *v1alpha1.MachineOSConfig) error {
	var pools v1alpha1.MachineConfigPoolList
	if err := r.Client.List(ctx, &pools, client.MatchingFields{layeredByIndex: mosc.Name}); err != nil {
		return fmt.Errorf("find the pools MachineOSConfig %s layered: %w", mosc.Name, err)
	}
	for _, p := range pools.Items {
		if p.Name == mosc.Spec.MachineConfigPool.Name && mosc.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.releasePool(ctx, mosc, p.Name); err != nil {
			return err
		}
	}
	return nil
}

// releasePool undoes what a MachineOSConfig set on a pool it no longer
// layers: its claim and the ImageBuildDegraded condition (an unlayered
// pool builds nothing). A pool another MachineOSConfig layers is left
// alone.
func (r *Reconciler) releasePool(ctx context.Context, mosc *v1alpha1.MachineOSConfig, name string) error {
	pool := &v1alpha1.MachineConfigPool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if claim := pool.Annotations[v1alpha1.LayeredByAnnotation]; claim != mosc.Name {
		return nil
	}
	before := pool.DeepCopy()
	if meta.RemoveStatusCondition(&pool.Status.Conditions, v1alpha1.PoolImageBuildDegraded) {
		if err := poolstatus.Build.Apply(ctx, r.Client, before, pool); err != nil {
			return err
		}
		before = pool.DeepCopy()
	}
	delete(pool.Annotations, v1alpha1.LayeredByAnnotation)
	if err := r.Client.Patch(ctx, pool, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("release pool %s: %w", pool.Name, err)
	}
	log.FromContext(ctx).Info("Released the pool", "pool", pool.Name)
	return nil
}
