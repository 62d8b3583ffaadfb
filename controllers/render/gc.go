package render

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/history"
)

// collectGarbage deletes the pool's rendered configs that are neither its
// current one nor named by any node as current or desired, beyond the
// newest History of them. Nodes are asked across all pools: a node moved to
// another pool may still run this pool's config.
func (r *Reconciler) collectGarbage(ctx context.Context, pool *v1alpha1.MachineConfigPool) error {
	var owned v1alpha1.MachineConfigList
	if err := r.Client.List(ctx, &owned, client.MatchingLabels{v1alpha1.PoolLabel: pool.Name}); err != nil {
		return fmt.Errorf("list rendered configs of pool %s: %w", pool.Name, err)
	}
	inUse, err := history.NamedByNodes(ctx, r.Client,
		[]string{v1alpha1.CurrentConfigAnnotation, v1alpha1.DesiredConfigAnnotation}, pool.Status.Configuration.Name)
	if err != nil {
		return err
	}

	var unused []v1alpha1.MachineConfig
	for _, mc := range owned.Items {
		if metav1.IsControlledBy(&mc, pool) && !inUse[mc.Name] {
			unused = append(unused, mc)
		}
	}
	keep := r.History
	if keep <= 0 {
		keep = DefaultHistory
	}
	if len(unused) <= keep {
		return nil
	}
	// Newest first, by the nanosecond creation annotation; the name breaks
	// ties so that every run picks the same ones.
	slices.SortFunc(unused, func(a, b v1alpha1.MachineConfig) int { return history.NewestFirst(&a, &b) })
	for i := keep; i < len(unused); i++ {
		mc := &unused[i]
		switch err := r.Client.Delete(ctx, mc, client.Preconditions{UID: &mc.UID}); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("delete old rendered config %s: %w", mc.Name, err)
		default:
			log.FromContext(ctx).Info("Deleted an unused rendered config", "renderedConfig", mc.Name, "history", keep)
		}
	}
	return nil
}
