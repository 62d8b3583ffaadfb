package pullsecret

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// DefaultNodeNamespace is where the node pull secrets are copied to: the
// daemon's --namespace default and config/nodes' namespace.
const DefaultNodeNamespace = "strata-nodes"

// CopyLabel marks a Secret in the node namespace as this controller's
// copy; its value is "true". Only labelled Secrets are updated or deleted.
const CopyLabel = v1alpha1.Prefix + "node-pull-secret"

// UsedByAnnotation on a copy lists the MachineOSConfigs that name it,
// comma separated, for a person reading the namespace.
const UsedByAnnotation = v1alpha1.Prefix + "used-by"

// Field indexes of the manager's cache.
const (
	// pullIndex: MachineOSConfigs by their renderedImagePullSecret.
	pullIndex = "strata.pullsecret.pull"
	// pushIndex: MachineOSConfigs by their renderedImagePushSecret.
	pushIndex = "strata.pullsecret.push"
)

// Reconciler keeps the copies of the node pull secrets in NodeNamespace.
type Reconciler struct {
	Client client.Client
	// Recorder, if set, records a Warning on a MachineOSConfig whose pull
	// secret is not copied.
	Recorder events.EventRecorder
	// SourceNamespace holds the Secrets MachineOSConfigs name (the build
	// namespace).
	SourceNamespace string
	// NodeNamespace holds the copies the daemons read.
	NodeNamespace string
}

// The controller's rights: read the Secrets MachineOSConfigs name, and
// manage the copies. Nothing in the node namespace is listed from outside
// this controller; the daemons only get.
//
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineosconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=strata-nodes,resources=secrets,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the reconciler. A copy is reconciled when a
// MachineOSConfig names or stops naming its source, when the source
// changes, and when the copy itself changes (so that an edited or deleted
// copy is put back, and at start every copy is checked).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.MachineOSConfig{}, pullIndex, func(o client.Object) []string {
		return pullSecretOf(o.(*v1alpha1.MachineOSConfig))
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1alpha1.MachineOSConfig{}, pushIndex, func(o client.Object) []string {
		return []string{o.(*v1alpha1.MachineOSConfig).Spec.RenderedImagePushSecret.Name}
	}); err != nil {
		return err
	}
	inNamespace := func(ns string) builder.Predicates {
		return builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns }))
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("pullsecret").
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(byName), inNamespace(r.NodeNamespace)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(byName), inNamespace(r.SourceNamespace)).
		Watches(&v1alpha1.MachineOSConfig{}, configSecrets{}).
		Complete(r)
}

// byName maps a source or a copy to the key of the copy: its name alone,
// the same key for both, so that one change is one reconcile. The
// reconcile decides whether anything names it.
func byName(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
}

// configSecrets maps a MachineOSConfig to the copies it concerns: its
// pull secret before and after a change (the old one may now be unused),
// and its push secret, which must not be copied.
type configSecrets struct{}

func (configSecrets) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueSecrets(q, e.Object)
}

func (configSecrets) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueSecrets(q, e.ObjectOld)
	enqueueSecrets(q, e.ObjectNew)
}

func (configSecrets) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueSecrets(q, e.Object)
}

func (configSecrets) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueSecrets(q, e.Object)
}

// enqueueSecrets enqueues the copies of the Secrets o names, by name
// only: the reconcile adds the node namespace.
func enqueueSecrets(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
	mosc, ok := o.(*v1alpha1.MachineOSConfig)
	if !ok {
		return
	}
	for _, name := range append(pullSecretOf(mosc), mosc.Spec.RenderedImagePushSecret.Name) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
}

func pullSecretOf(m *v1alpha1.MachineOSConfig) []string {
	if ref := m.Spec.RenderedImagePullSecret; ref != nil && ref.Name != "" {
		return []string{ref.Name}
	}
	return nil
}

// Reconcile makes the copy named req.Name what its source and the
// MachineOSConfigs say: equal to the source while a MachineOSConfig names
// it as its pull secret and none pushes with it, absent otherwise.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	name := req.Name
	logger := log.FromContext(ctx).WithValues("secret", name)
	var users, pushers v1alpha1.MachineOSConfigList
	if err := r.Client.List(ctx, &users, client.MatchingFields{pullIndex: name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("find the MachineOSConfigs pulling with %s: %w", name, err)
	}
	if err := r.Client.List(ctx, &pushers, client.MatchingFields{pushIndex: name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("find the MachineOSConfigs pushing with %s: %w", name, err)
	}
	names := configNames(users.Items)
	want, err := r.wanted(ctx, name, names, pushers.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	if want == nil {
		if len(names) > 0 && len(pushers.Items) > 0 {
			// Said on every MachineOSConfig that pulls with it, at
			// every reconcile of it: the events API folds repeats.
			for i := range users.Items {
				r.warn(&users.Items[i], "PullSecretNotCopied",
					"renderedImagePullSecret %s is the renderedImagePushSecret of MachineOSConfig %s: nodes must not hold push credentials, so it is not given to them; name a Secret with pull rights only",
					name, strings.Join(configNames(pushers.Items), ", "))
			}
		}
		return ctrl.Result{}, r.deleteCopy(ctx, name)
	}
	copied := &corev1.Secret{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: r.NodeNamespace, Name: name}, copied)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil {
			return ctrl.Result{}, fmt.Errorf("copy pull secret %s to %s: %w", name, r.NodeNamespace, err)
		}
		logger.Info("Copied the node pull secret", "namespace", r.NodeNamespace, "machineOSConfigs", names)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get the copy of pull secret %s: %w", name, err)
	case copied.Labels[CopyLabel] != "true":
		// Someone else's Secret: overwriting it could hand the nodes
		// what its owner meant for something else.
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("secret %s/%s exists and is not a copy made by Strata (no label %s=true): delete it so that the pull secret can be copied",
			r.NodeNamespace, name, CopyLabel))
	}
	if copied.Type == want.Type && equality.Semantic.DeepEqual(copied.Data, want.Data) &&
		copied.Annotations[UsedByAnnotation] == want.Annotations[UsedByAnnotation] {
		return ctrl.Result{}, nil
	}
	if copied.Type != want.Type {
		// The type is immutable.
		if err := r.deleteCopy(ctx, name); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.Client.Create(ctx, want)
	}
	want.ResourceVersion = copied.ResourceVersion
	if err := r.Client.Update(ctx, want); err != nil {
		return ctrl.Result{}, fmt.Errorf("update the copy of pull secret %s: %w", name, err)
	}
	logger.Info("Updated the node pull secret", "namespace", r.NodeNamespace, "machineOSConfigs", names)
	return ctrl.Result{}, nil
}

// wanted is the copy of Secret name there should be, or nil for none:
// some MachineOSConfig pulls with it, none pushes with it, and the source
// exists. Only the key bootc reads is copied.
func (r *Reconciler) wanted(ctx context.Context, name string, users []string, pushers []v1alpha1.MachineOSConfig) (*corev1.Secret, error) {
	if len(users) == 0 || len(pushers) > 0 {
		return nil, nil
	}
	src := &corev1.Secret{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.SourceNamespace, Name: name}, src); err != nil {
		if apierrors.IsNotFound(err) {
			// The build controller reports a missing Secret on the
			// MachineOSConfig; nodes keep no stale copy of it.
			return nil, nil
		}
		return nil, fmt.Errorf("get pull secret %s/%s: %w", r.SourceNamespace, name, err)
	}
	data, ok := src.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return nil, nil
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   r.NodeNamespace,
			Name:        name,
			Labels:      map[string]string{CopyLabel: "true"},
			Annotations: map[string]string{UsedByAnnotation: strings.Join(users, ",")},
		},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: data},
	}, nil
}

// deleteCopy deletes the copy of Secret name, if it is one.
func (r *Reconciler) deleteCopy(ctx context.Context, name string) error {
	copied := &corev1.Secret{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.NodeNamespace, Name: name}, copied); err != nil {
		return client.IgnoreNotFound(err)
	}
	if copied.Labels[CopyLabel] != "true" {
		return nil
	}
	if err := r.Client.Delete(ctx, copied, client.Preconditions{UID: &copied.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete the copy of pull secret %s: %w", name, err)
	}
	log.FromContext(ctx).Info("Deleted the node pull secret", "namespace", r.NodeNamespace, "secret", name)
	return nil
}

func (r *Reconciler) warn(m *v1alpha1.MachineOSConfig, reason, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, reason, "CopyPullSecret", note, args...)
	}
}

func configNames(items []v1alpha1.MachineOSConfig) []string {
	names := make([]string, 0, len(items))
	for _, m := range items {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}
