// Package layering is the one rule for which MachineOSConfig layers a
// pool. The build controller records it as a claim on the pool (the
// layered-by annotation, first come, written with an optimistic lock);
// every reader, the build controller deciding whether it may build and the
// rollout controller deciding which build's image the nodes get, asks
// Holder, so the two can never disagree about it.
package layering

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Holder is the MachineOSConfig that layers the pool: the one the pool's
// claim names, as long as it exists, is not being deleted (its pool rolls
// back while its finalizer runs) and still names the pool (a re-pointed
// one no longer layers it, even before its claim is released). nil means
// the pool is not layered, or its claim is stale and free to take.
func Holder(ctx context.Context, c client.Reader, pool *v1alpha1.MachineConfigPool) (*v1alpha1.MachineOSConfig, error) {
	claim := pool.Annotations[v1alpha1.LayeredByAnnotation]
	if claim == "" {
		return nil, nil
	}
	mosc := &v1alpha1.MachineOSConfig{}
	if err := c.Get(ctx, client.ObjectKey{Name: claim}, mosc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get MachineOSConfig %s, which claims pool %s: %w", claim, pool.Name, err)
	}
	if !mosc.DeletionTimestamp.IsZero() || mosc.Spec.MachineConfigPool.Name != pool.Name {
		return nil, nil
	}
	return mosc, nil
}
