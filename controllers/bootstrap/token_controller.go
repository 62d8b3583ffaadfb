package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

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

// TokenReconciler keeps one bootstrap token Secret per pool that takes
// new nodes (spec.bootstrapToken), and none for the others.
type TokenReconciler struct {
	Client client.Client
	// Namespace holds the tokens (strata-config-server, the config
	// server's own: not strata-system, whose Secrets it may not read).
	Namespace string
	// Now is the clock rotations are scheduled by; nil is time.Now.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=strata-config-server,resources=secrets,verbs=get;list;watch;create;delete

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

func (r *TokenReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile makes the token Secret of a pool that takes new nodes when it
// has none, replaces one that is due or asked to rotate, and deletes the
// token of a pool that takes none.
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
		if pool.Spec.BootstrapToken == nil {
			return ctrl.Result{}, nil
		}
		return r.create(ctx, &pool, key, nil)
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get bootstrap token %s: %w", key, err)
	}
	if sec.Labels[v1alpha1.BootstrapTokenLabel] != pool.Name {
		// Not a token the controller made (the config server ignores
		// it too): a user's Secret under that name is left alone.
		return ctrl.Result{}, nil
	}
	spec := pool.Spec.BootstrapToken
	if spec == nil {
		// A token exists only while the pool takes new nodes.
		if err := r.delete(ctx, &sec); err != nil {
			return ctrl.Result{}, fmt.Errorf("delete bootstrap token %s of pool %s, which sets no spec.bootstrapToken: %w", key, pool.Name, err)
		}
		log.FromContext(ctx).Info("Deleted the bootstrap token of a pool that takes no new nodes", "pool", pool.Name, "secret", key.String())
		return ctrl.Result{}, nil
	}
	now := r.now()
	issued := sec.CreationTimestamp.Time
	_, asked := sec.Annotations[v1alpha1.RotateTokenAnnotation]
	if due := rotationDue(spec, issued); !asked && (due.IsZero() || now.Before(due)) {
		return requeueAt(now, due), nil
	}
	// The replaced token works on for the overlap, but never past its
	// own expiry: no token outlives rotationPeriod + rotationOverlap.
	previous := &previousToken{token: sec.Data[v1alpha1.BootstrapTokenKey], expires: now.Add(spec.Overlap())}
	if exp := spec.Expiry(issued); !exp.IsZero() && exp.Before(previous.expires) {
		previous.expires = exp
	}
	if !previous.expires.After(now) || len(previous.token) == 0 {
		previous = nil
	}
	if err := r.delete(ctx, &sec); err != nil {
		return ctrl.Result{}, fmt.Errorf("delete bootstrap token %s to rotate it: %w", key, err)
	}
	log.FromContext(ctx).Info("Rotating the bootstrap token", "pool", pool.Name, "secret", key.String(), "asked", asked)
	return r.create(ctx, &pool, key, previous)
}

// rotationDue is when a token made at issued is to be replaced; the zero
// time when only on demand.
func rotationDue(spec *v1alpha1.BootstrapToken, issued time.Time) time.Time {
	if spec.RotationPeriod == nil {
		return time.Time{}
	}
	return issued.Add(spec.RotationPeriod.Duration)
}

// requeueAt comes back when due (a second late, since creation times are
// whole seconds); never when due is zero.
func requeueAt(now, due time.Time) ctrl.Result {
	if due.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: due.Sub(now) + time.Second}
}

// delete deletes only the Secret read, not one made meanwhile.
func (r *TokenReconciler) delete(ctx context.Context, sec *corev1.Secret) error {
	pre := client.Preconditions{UID: &sec.UID, ResourceVersion: &sec.ResourceVersion}
	return client.IgnoreNotFound(r.Client.Delete(ctx, sec, pre))
}

// previousToken is the token a rotation replaced, kept beside its
// successor until expires.
type previousToken struct {
	token   []byte
	expires time.Time
}

func (r *TokenReconciler) create(ctx context.Context, pool *v1alpha1.MachineConfigPool, key types.NamespacedName, previous *previousToken) (ctrl.Result, error) {
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return ctrl.Result{}, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{v1alpha1.BootstrapTokenLabel: pool.Name}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{v1alpha1.BootstrapTokenKey: []byte(base64.RawURLEncoding.EncodeToString(raw))},
	}
	if previous != nil {
		sec.Data[v1alpha1.PreviousBootstrapTokenKey] = previous.token
		sec.Annotations = map[string]string{v1alpha1.PreviousTokenExpiresAnnotation: previous.expires.UTC().Format(time.RFC3339)}
	}
	if err := controllerutil.SetOwnerReference(pool, sec, r.Client.Scheme()); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Client.Create(ctx, sec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, nil // made meanwhile; its own event reconciles again
		}
		return ctrl.Result{}, fmt.Errorf("create bootstrap token %s: %w", key, err)
	}
	log.FromContext(ctx).Info("Created a bootstrap token", "pool", pool.Name, "secret", key.String())
	now := r.now()
	return requeueAt(now, rotationDue(pool.Spec.BootstrapToken, now)), nil
}
