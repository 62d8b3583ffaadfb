package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/history"
	"github.com/strata-dev/strata/internal/poolstatus"
	"github.com/strata-dev/strata/internal/retry"
	"github.com/strata-dev/strata/internal/status"
	"github.com/strata-dev/strata/internal/version"
	"github.com/strata-dev/strata/machineconfig"
	"github.com/strata-dev/strata/nodeconfig"
)

// Reconciler renders MachineConfigPools.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// MaxRetryDelay bounds the wait before the next try of a pool whose
	// render failed in a way that may heal by itself (a read or a write
	// the API server did not answer): tries back off from half a second,
	// doubling, up to this. Zero is retry.DefaultMaxDelay.
	MaxRetryDelay time.Duration

	retries retry.Backoff
}

// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigs,verbs=get;list;watch;create;update

// SetupWithManager registers the reconciler: a pool is reconciled when its
// spec changes, when a rendered config it owns is edited or deleted (it is
// restored), and when a MachineConfig it selects, or selected before a
// label change, changes. Nodes do not concern it: which rendered configs
// they use matters only to GCReconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("render").
		For(&v1alpha1.MachineConfigPool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Its own creates need no second look.
		Owns(&v1alpha1.MachineConfig{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
		})).
		Watches(&v1alpha1.MachineConfig{}, r.poolsSelecting()).
		Complete(r)
}

// poolsSelecting maps a MachineConfig that a person wrote to the pools
// whose machineConfigSelector matches its labels: after an update, its old
// labels or its new ones, since a label change moves it from one pool to
// another. The pools come from the cache; no event lists MachineConfigs.
func (r *Reconciler) poolsSelecting() handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		var sets []labels.Set
		for _, o := range objs {
			if isSource(o) {
				sets = append(sets, labels.Set(o.GetLabels()))
			}
		}
		if len(sets) == 0 {
			return
		}
		var pools v1alpha1.MachineConfigPoolList
		if err := r.Client.List(ctx, &pools); err != nil {
			log.FromContext(ctx).Error(err, "Cannot find the pools of a changed MachineConfig", "machineConfig", objs[0].GetName())
			return
		}
		for i := range pools.Items {
			if selects(&pools.Items[i], sets) {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pools.Items[i])})
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if sourceChanged(e.ObjectOld, e.ObjectNew) {
				enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
	}
}

// selects tells whether the pool's machineConfigSelector matches any of
// the label sets. A nil selector selects nothing; an invalid one cannot be
// stored (the API validates it), so it selects nothing either.
func selects(pool *v1alpha1.MachineConfigPool, sets []labels.Set) bool {
	if pool.Spec.MachineConfigSelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pool.Spec.MachineConfigSelector)
	if err != nil {
		return false
	}
	for _, s := range sets {
		if sel.Matches(s) {
			return true
		}
	}
	return false
}

// sourceChanged passes what a render reads of a MachineConfig: its spec
// (the generation; status has its own subresource), its labels, whether it
// is being deleted and whether it is a rendered one.
func sourceChanged(o, n client.Object) bool {
	return o.GetGeneration() != n.GetGeneration() ||
		!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
		o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() ||
		isSource(o) != isSource(n)
}

// isSource tells a MachineConfig written by a person from a rendered one.
func isSource(obj client.Object) bool {
	return !machineconfig.Rendered(obj)
}

// Reconcile renders one pool. It is level-based: from any state of the
// world, including a crash between creating a rendered config and writing
// the pool's status, it reaches the same result, because the rendered name
// is a function of the content.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return status.QuietConflict(ctx, res, err)
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &v1alpha1.MachineConfigPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		// A deleted pool's rendered configs go with it through their owner
		// references.
		if apierrors.IsNotFound(err) {
			r.retries.Forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := pool.DeepCopy()

	rendered, sources, renderErr, err := r.render(ctx, pool)
	switch {
	case apierrors.IsConflict(err) || errors.Is(err, reconcile.TerminalError(nil)):
		return ctrl.Result{}, err
	case err != nil:
		// It may heal by itself: the pool says what failed and when it
		// is tried again, on a backoff of the controller's own (the
		// work queue's grows to minutes and is told nowhere).
		a := r.retries.Fail(pool.Name, err, r.MaxRetryDelay, time.Now())
		setRetrying(pool, a)
		if err := poolstatus.Render.Apply(ctx, r.Client, before, pool); err != nil {
			return ctrl.Result{}, err
		}
		log.FromContext(ctx).Info("Reconcile failed; trying again", "error", err.Error(), "after", a.After)
		return ctrl.Result{RequeueAfter: a.After}, nil
	}
	r.retries.Forget(pool.Name)

	setStatus(pool, rendered, sources, renderErr)
	// Other controllers own other parts of the pool's status.
	if err := poolstatus.Render.Apply(ctx, r.Client, before, pool); err != nil {
		return ctrl.Result{}, err
	}
	logger := log.FromContext(ctx)
	wasDegraded := meta.IsStatusConditionTrue(before.Status.Conditions, v1alpha1.PoolRenderDegraded)
	if renderErr != nil {
		// Tell people once per distinct problem, not on every reconcile.
		if old := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.PoolRenderDegraded); old == nil ||
			old.Status != metav1.ConditionTrue || old.Message != meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.PoolRenderDegraded).Message {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, inputReason(renderErr), "Render", "%s", status.Truncate(renderErr.Error(), 1024))
			logger.Info("Pool cannot render its MachineConfigs and keeps its configuration",
				"reason", inputReason(renderErr), "renderedConfig", pool.Status.Configuration.Name, "sources", len(sources),
				"message", status.Truncate(renderErr.Error(), 1024))
		}
		// The input is wrong; retrying will not fix it. A change to any
		// MachineConfig triggers a new attempt.
		return ctrl.Result{}, nil
	}
	// Warnings, once per change of what they say.
	if now := meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.PoolRenderDegraded); now.Reason == v1alpha1.ReasonRenderedWithWarnings {
		if old := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.PoolRenderDegraded); old == nil || old.Message != now.Message {
			r.Recorder.Eventf(pool, rendered, corev1.EventTypeWarning, v1alpha1.ReasonRenderedWithWarnings, "Render", "%s", status.Truncate(now.Message, 1024))
		}
	}
	switch {
	case before.Status.Configuration.Name != rendered.Name:
		r.Recorder.Eventf(pool, rendered, corev1.EventTypeNormal, v1alpha1.ReasonRendered, "Render", "Rendered %s from %d MachineConfigs", rendered.Name, len(sources))
		logger.Info("Pool has a new rendered config", "renderedConfig", rendered.Name,
			"previousConfig", before.Status.Configuration.Name, "sources", len(sources))
	case wasDegraded:
		logger.Info("Pool renders its MachineConfigs again", "renderedConfig", rendered.Name, "sources", len(sources))
	default:
		logger.V(1).Info("Pool's rendered config is current", "renderedConfig", rendered.Name, "sources", len(sources))
	}
	return ctrl.Result{}, nil
}

// render selects the pool's MachineConfigs, merges them and makes sure
// their rendered config exists. renderErr is an error in the input (an
// *inputError), which the status reports; err is any other, which may
// heal by itself.
func (r *Reconciler) render(ctx context.Context, pool *v1alpha1.MachineConfigPool) (rendered *v1alpha1.MachineConfig, sources []v1alpha1.MachineConfig, renderErr, err error) {
	sources, err = r.selectSources(ctx, pool)
	if err != nil {
		return nil, nil, nil, err
	}
	name, spec, renderErr := Render(pool.Name, sources)
	if renderErr == nil {
		rendered, renderErr = r.ensureRendered(ctx, pool, name, spec, sources)
	}
	if renderErr != nil && !isInputError(renderErr) {
		return nil, sources, nil, renderErr
	}
	return rendered, sources, renderErr, nil
}

// selectSources lists the MachineConfigs the pool selects, in name order.
// A nil selector selects none, as in a Deployment.
func (r *Reconciler) selectSources(ctx context.Context, pool *v1alpha1.MachineConfigPool) ([]v1alpha1.MachineConfig, error) {
	if pool.Spec.MachineConfigSelector == nil {
		return nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(pool.Spec.MachineConfigSelector)
	if err != nil {
		return nil, reconcile.TerminalError(fmt.Errorf("pool %s: spec.machineConfigSelector: %w", pool.Name, err))
	}
	var all v1alpha1.MachineConfigList
	if err := r.Client.List(ctx, &all, client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("list MachineConfigs: %w", err)
	}
	// The list is narrowed by the cache's label index; Select applies the
	// rest of the rule stratactl shares.
	sources, _, err := machineconfig.Select(pool.Spec.MachineConfigSelector, all.Items)
	return sources, err
}

// inputError is an error in what a person wrote; it becomes a condition
// with reason (ReasonInvalidConfig when empty), not a retry.
type inputError struct{ msg, reason string }

func (e *inputError) Error() string { return e.msg }

func isInputError(err error) bool {
	var ie *inputError
	return errors.As(err, &ie)
}

// inputReason is the condition reason of an input error.
func inputReason(err error) string {
	var ie *inputError
	if errors.As(err, &ie) && ie.reason != "" {
		return ie.reason
	}
	return v1alpha1.ReasonInvalidConfig
}

// refusedAsTooLarge tells whether the API server refused to store an
// object for its size. Only a request over the API server's own limit
// comes back as 413; etcd's refusal (over --max-request-bytes, or over the
// gRPC message limit between the two) is passed on as an internal error
// that carries etcd's message.
func refusedAsTooLarge(err error) bool {
	if apierrors.IsRequestEntityTooLargeError(err) {
		return true
	}
	if !apierrors.IsInternalError(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "etcdserver: request is too large") || strings.Contains(msg, "trying to send message larger than max")
}

// storeError turns the API server's refusal of a rendered config for its
// size into an input error: retrying would fail the same way.
func storeError(verb, name string, sources []v1alpha1.MachineConfig, err error) error {
	if refusedAsTooLarge(err) {
		return &inputError{reason: v1alpha1.ReasonConfigTooLarge, msg: fmt.Sprintf(
			"the API server refused to store rendered config %s of MachineConfigs %s as too large (%v): move large files into the image (the MachineOSConfig's containerFile), compress them (contents.compression: gzip), or select fewer MachineConfigs",
			name, sourceNames(sources), err)}
	}
	return fmt.Errorf("%s %s: %w", verb, name, err)
}

// validateSources checks every selected MachineConfig with the renderer's
// own validator and names each bad one with its fields.
func validateSources(sources []v1alpha1.MachineConfig) error {
	var msgs []string
	for i := range sources {
		mc := &sources[i]
		if errs := nodeconfig.ValidateMachineConfigSpec(&mc.Spec, field.NewPath("spec")); len(errs) > 0 {
			msgs = append(msgs, fmt.Sprintf("MachineConfig %s: %s", mc.Name, errs.ToAggregate().Error()))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return &inputError{msg: strings.Join(msgs, "; ")}
}

// Render is the pure core of the controller: it validates the sources,
// merges them, validates the merge and names the result. An error in the
// input is an *inputError naming the MachineConfig and the field; a merge
// too large to store as a MachineConfig is one with ReasonConfigTooLarge.
func Render(pool string, sources []v1alpha1.MachineConfig) (name string, spec v1alpha1.MachineConfigSpec, err error) {
	if err := validateSources(sources); err != nil {
		return "", spec, err
	}
	spec, merged, err := machineconfig.MergeIgnition(sources)
	var tooLarge *machineconfig.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return "", spec, &inputError{msg: err.Error(), reason: v1alpha1.ReasonConfigTooLarge}
	case err != nil:
		return "", spec, &inputError{msg: err.Error()}
	}
	// Each source is valid alone; their merge must be too (two configs may
	// disagree, e.g. a link in one and a file under it in another).
	if errs := nodeconfig.ValidateMergedSpec(&spec, merged, field.NewPath("spec")); len(errs) > 0 {
		return "", spec, &inputError{msg: fmt.Sprintf("merged MachineConfigs %s: %s", sourceNames(sources), errs.ToAggregate().Error())}
	}
	hash, err := machineconfig.Hash(spec)
	if err != nil {
		return "", spec, err
	}
	return machineconfig.RenderedName(pool, hash), spec, nil
}

// ensureRendered makes sure the rendered config exists with exactly the
// merged content.
func (r *Reconciler) ensureRendered(ctx context.Context, pool *v1alpha1.MachineConfigPool, name string, spec v1alpha1.MachineConfigSpec, sources []v1alpha1.MachineConfig) (*v1alpha1.MachineConfig, error) {
	rendered := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(rendered), rendered)
	switch {
	case apierrors.IsNotFound(err):
		rendered.Labels = map[string]string{v1alpha1.PoolLabel: pool.Name}
		rendered.Annotations = map[string]string{
			v1alpha1.GeneratedByControllerAnnotation: version.Version,
			v1alpha1.SourceMachineConfigsAnnotation:  sourceNames(sources),
			v1alpha1.CreatedAnnotation:               history.Stamp(),
		}
		rendered.Spec = spec
		if err := controllerutil.SetControllerReference(pool, rendered, r.Client.Scheme()); err != nil {
			return nil, err
		}
		if err := r.Client.Create(ctx, rendered); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, storeError("create", rendered.Name, sources, err)
		}
		log.FromContext(ctx).V(1).Info("Created rendered config", "renderedConfig", rendered.Name, "sources", sourceNames(sources))
		return rendered, nil
	case err != nil:
		return nil, fmt.Errorf("get %s: %w", rendered.Name, err)
	}
	// The name is the content hash: a rendered config whose content was
	// edited by hand no longer matches its name, so restore it.
	if !sameContent(&rendered.Spec, &spec) || rendered.Annotations[v1alpha1.SourceMachineConfigsAnnotation] != sourceNames(sources) {
		rendered.Spec = spec
		if rendered.Annotations == nil {
			rendered.Annotations = map[string]string{}
		}
		rendered.Annotations[v1alpha1.GeneratedByControllerAnnotation] = version.Version
		rendered.Annotations[v1alpha1.SourceMachineConfigsAnnotation] = sourceNames(sources)
		if err := r.Client.Update(ctx, rendered); err != nil {
			return nil, storeError("restore", rendered.Name, sources, err)
		}
		log.FromContext(ctx).Info("Restored a rendered config whose content no longer matched its name", "renderedConfig", rendered.Name)
	}
	return rendered, nil
}

// sameContent tells whether a stored rendered config holds the merged
// spec. The API server stores the Ignition config with its keys sorted, so
// its bytes differ from the merge's even when the content is the same:
// comparing bytes would rewrite every rendered config on every reconcile.
func sameContent(stored, merged *v1alpha1.MachineConfigSpec) bool {
	a, b := *stored, *merged
	a.Config, b.Config = runtime.RawExtension{}, runtime.RawExtension{}
	return equality.Semantic.DeepEqual(a, b) && sameJSON(stored.Config.Raw, merged.Config.Raw)
}

// sameJSON compares two JSON documents by value, numbers exactly.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	decode := func(raw []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	}
	va, errA := decode(a)
	vb, errB := decode(b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}

func sourceNames(sources []v1alpha1.MachineConfig) string {
	names := make([]string, len(sources))
	for i := range sources {
		names[i] = sources[i].Name
	}
	return strings.Join(names, ",")
}
