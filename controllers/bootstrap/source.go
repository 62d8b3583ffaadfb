package bootstrap

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// startSource enqueues the one key once at start, so that a cluster
// without either Secret gets them.
func startSource(namespace string) source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: v1alpha1.ConfigServerTLSSecret}})
		return nil
	})
}
