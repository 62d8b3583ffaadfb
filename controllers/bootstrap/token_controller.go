package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// tokenBytes is the token's entropy: 256 bits.
const tokenBytes = 32

// TokenReconciler keeps one bootstrap token Secret per pool.
type TokenReconciler struct {
	Client client.Client
	// Namespace holds the tokens (strata-config-server, the config
	// server's own: not strata-system, whose Secrets it may not read).
	Namespace string
}

// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=secrets,verbs=get;list;watch;create;delete

// SetupWithManager registers the reconciler: per pool, and per token
// Secret (its pool), so that a deleted or annotated token is replaced.
func (r *TokenReconciler) SetupWithManager(mgr ctrl.Manager) error {
	tokens := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Namespace && o.GetLabels()[v1alpha1.BootstrapTokenLabel] != ""
	}))
	return ctrl.NewControllerManagedBy(mgr).
		Named("bootstraptoken").
		For(&v1alpha1.MachineConfigPool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetLabels()[v1alpha1.BootstrapTokenLabel]}}}
		}), tokens).
		Complete(r)
}

// Reconcile makes the pool's token Secret when it has none, and replaces
// one asked to rotate.
func (r *TokenReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pool v1alpha1.MachineConfigPool
	if err := r.Client.Get(ctx, req.NamespacedName, &pool); err != nil {
		// A deleted pool's Secret goes with it (owner reference).
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	key := types.NamespacedName{Namespace: r.Namespace, Name: v1alpha1.BootstrapTokenSecretName(pool.Name)}
	var sec corev1.Secret
	err := r.Client.Get(ctx, key, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.create(ctx, &pool, key)
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get bootstrap token %s: %w", key, err)
	}
	if _, rotate := sec.Annotations[v1alpha1.RotateTokenAnnotation]; !rotate {
		return ctrl.Result{}, nil
	}
	// Delete only the Secret read, not one made meanwhile.
	pre := client.Preconditions{UID: &sec.UID, ResourceVersion: &sec.ResourceVersion}
	if err := r.Client.Delete(ctx, &sec, pre); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete bootstrap token %s to rotate it: %w", key, err)
	}
	log.FromContext(ctx).Info("Rotating the bootstrap token", "pool", pool.Name, "secret", key.String())
	return ctrl.Result{}, r.create(ctx, &pool, key)
}

func (r *TokenReconciler) create(ctx context.Context, pool *v1alpha1.MachineConfigPool, key types.NamespacedName) error {
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{v1alpha1.BootstrapTokenLabel: pool.Name}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{v1alpha1.BootstrapTokenKey: []byte(base64.RawURLEncoding.EncodeToString(raw))},
	}
	if err := controllerutil.SetOwnerReference(pool, sec, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, sec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // made meanwhile; its own event reconciles again
		}
		return fmt.Errorf("create bootstrap token %s: %w", key, err)
	}
	log.FromContext(ctx).Info("Created a bootstrap token", "pool", pool.Name, "secret", key.String())
	return nil
}
