// Package poolstatus writes a MachineConfigPool's status, which several
// controllers share. Each owns a Share, a set of status fields and
// condition types, and writes only that, with server-side apply under a
// field manager of its own: writes never conflict, and no controller can
// drop or overwrite what another wrote. Degraded, which summarises the
// others, is computed by one function (Degraded) and written by one owner
// (controllers/degraded).
package poolstatus

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/status"
)

// Share is the part of a pool's status one controller owns.
type Share struct {
	// Manager is the field manager its writes are recorded under.
	Manager string
	// Fields are the JSON names of the status fields it owns.
	Fields []string
	// Conditions are the condition types it owns.
	Conditions []string
}

// The shares of a pool's status, one per controller.
var (
	Render = Share{Manager: "strata-render",
		Fields: []string{"observedGeneration", "configuration"}, Conditions: []string{v1alpha1.PoolRenderDegraded}}
	Build   = Share{Manager: "strata-build", Conditions: []string{v1alpha1.PoolImageBuildDegraded}}
	Rollout = Share{Manager: "strata-rollout",
		Fields: []string{"machineCount", "updatedMachineCount", "readyMachineCount", "unavailableMachineCount", "degradedMachineCount",
			"maintenanceWindow", "newNodes", "stagedAheadMachineCount", "canary", "progressive"},
		Conditions: []string{v1alpha1.PoolUpdated, v1alpha1.PoolUpdating, v1alpha1.PoolNodeDegraded}}
	Aggregate = Share{Manager: "strata-pool-degraded", Conditions: []string{v1alpha1.PoolDegraded}}
)

// Apply writes the share's part of after's status, if it differs from
// before's (the pool as read): a reconcile that finds the world as it was
// costs no write. A condition of the share that after no longer has is
// removed. The pool may have been written by others since it was read:
// their fields are not touched, and this share's are the caller's to
// decide, so ownership is forced. after gets the new resourceVersion.
func (s Share) Apply(ctx context.Context, c client.Client, before, after *v1alpha1.MachineConfigPool) error {
	was, err := s.extract(&before.Status)
	if err != nil {
		return err
	}
	now, err := s.extract(&after.Status)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(was, now) {
		return nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "MachineConfigPool",
		"metadata":   map[string]any{"name": after.Name},
		"status":     now,
	}}
	err = c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(s.Manager), client.ForceOwnership)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile: nothing to report on
		}
		return fmt.Errorf("apply the %s status of pool %s: %w", s.Manager, after.Name, err)
	}
	after.SetResourceVersion(u.GetResourceVersion())
	return nil
}

// extract is the share's part of a status, as it is applied.
func (s Share) extract(st *v1alpha1.MachineConfigPoolStatus) (map[string]any, error) {
	all, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, f := range s.Fields {
		if v, ok := all[f]; ok {
			out[f] = v
		}
	}
	var conds []any
	for i := range st.Conditions {
		if slices.Contains(s.Conditions, st.Conditions[i].Type) {
			c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st.Conditions[i])
			if err != nil {
				return nil, err
			}
			conds = append(conds, c)
		}
	}
	if len(conds) > 0 {
		out["conditions"] = conds
	}
	return out, nil
}

var degradedKinds = []string{v1alpha1.PoolRenderDegraded, v1alpha1.PoolImageBuildDegraded, v1alpha1.PoolNodeDegraded}

// Degraded is the pool's aggregate Degraded condition: true when any of
// RenderDegraded, ImageBuildDegraded or NodeDegraded is true, with their
// reasons joined.
func Degraded(pool *v1alpha1.MachineConfigPool) metav1.Condition {
	var reasons, messages []string
	for _, t := range degradedKinds {
		if c := meta.FindStatusCondition(pool.Status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			reasons = append(reasons, t)
			messages = append(messages, t+": "+c.Message)
		}
	}
	cond := metav1.Condition{Type: v1alpha1.PoolDegraded, ObservedGeneration: pool.Generation}
	if len(reasons) == 0 {
		cond.Status = metav1.ConditionFalse
		cond.Reason = v1alpha1.ReasonAsExpected
		cond.Message = "No part of the pool is degraded"
	} else {
		cond.Status = metav1.ConditionTrue
		cond.Reason = strings.Join(reasons, "And")
		cond.Message = status.Message(strings.Join(messages, "; "))
	}
	return cond
}

// DegradedInputsChanged says whether a pool update changed anything
// Degraded is computed from.
func DegradedInputsChanged(old, cur *v1alpha1.MachineConfigPool) bool {
	if old.Generation != cur.Generation {
		return true
	}
	for _, t := range degradedKinds {
		o, n := meta.FindStatusCondition(old.Status.Conditions, t), meta.FindStatusCondition(cur.Status.Conditions, t)
		if (o == nil) != (n == nil) || (o != nil && (o.Status != n.Status || o.Reason != n.Reason || o.Message != n.Message)) {
			return true
		}
	}
	return false
}
