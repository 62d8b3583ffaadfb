package render

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
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
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/internal/history"
	"github.com/strata-dev/strata/internal/status"
	"github.com/strata-dev/strata/internal/version"
	"github.com/strata-dev/strata/machineconfig"
)

// DefaultHistory is how many rendered configs a pool keeps besides the ones
// in use, so that a rollback to a recent configuration finds it.
const DefaultHistory = 5

// Reconciler renders MachineConfigPools.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// History is how many unused rendered configs to keep per pool;
	// zero means DefaultHistory.
	History int
}

// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// SetupWithManager registers the reconciler: a pool is reconciled when it
// changes, when a rendered config it owns changes, when any MachineConfig
// changes (its labels may move it into or out of any pool's selection), and
// when a node's config annotations change (they decide what may be
// garbage-collected).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	allPools := handler.EnqueueRequestsFromMapFunc(r.allPools)
	return ctrl.NewControllerManagedBy(mgr).
		Named("render").
		For(&v1alpha1.MachineConfigPool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&v1alpha1.MachineConfig{}).
		Watches(&v1alpha1.MachineConfig{}, allPools, builder.WithPredicates(predicate.NewPredicateFuncs(isSource))).
		Watches(&corev1.Node{}, allPools, builder.WithPredicates(nodeConfigChanged())).
		Complete(r)
}

func (r *Reconciler) allPools(ctx context.Context, _ client.Object) []reconcile.Request {
	var pools v1alpha1.MachineConfigPoolList
	if err := r.Client.List(ctx, &pools); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pools.Items))
	for _, p := range pools.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return reqs
}

// isSource tells a MachineConfig written by a person from a rendered one.
func isSource(obj client.Object) bool {
	return !machineconfig.Rendered(obj)
}

func nodeConfigChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
			return o[v1alpha1.CurrentConfigAnnotation] != n[v1alpha1.CurrentConfigAnnotation] ||
				o[v1alpha1.DesiredConfigAnnotation] != n[v1alpha1.DesiredConfigAnnotation]
		},
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// Reconcile renders one pool. It is level-based: from any state of the
// world, including a crash between creating a rendered config and writing
// the pool's status, it reaches the same result, because the rendered name
// is a function of the content.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &v1alpha1.MachineConfigPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		// A deleted pool's rendered configs go with it through their owner
		// references.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := pool.DeepCopy()

	sources, err := r.selectSources(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	var rendered *v1alpha1.MachineConfig
	name, spec, renderErr := Render(pool.Name, sources)
	switch {
	case renderErr == nil:
		rendered, renderErr = r.ensureRendered(ctx, pool, name, spec, sources)
		if renderErr != nil && !isInputError(renderErr) {
			return ctrl.Result{}, renderErr
		}
	case !isInputError(renderErr):
		return ctrl.Result{}, renderErr
	}

	setStatus(pool, rendered, sources, renderErr)
	// Other controllers own other conditions of the pool.
	if !equality.Semantic.DeepEqual(before.Status, pool.Status) {
		if err := status.Patch(ctx, r.Client, before, pool); err != nil {
			return ctrl.Result{}, fmt.Errorf("patch status of pool %s: %w", pool.Name, err)
		}
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
	return ctrl.Result{}, r.collectGarbage(ctx, pool)
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
		if errs := containerfile.ValidateMachineConfigSpec(&mc.Spec, field.NewPath("spec")); len(errs) > 0 {
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
	if errs := containerfile.ValidateMergedSpec(&spec, merged, field.NewPath("spec")); len(errs) > 0 {
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
	if !equality.Semantic.DeepEqual(rendered.Spec, spec) || rendered.Annotations[v1alpha1.SourceMachineConfigsAnnotation] != sourceNames(sources) {
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

func sourceNames(sources []v1alpha1.MachineConfig) string {
	names := make([]string, len(sources))
	for i := range sources {
		names[i] = sources[i].Name
	}
	return strings.Join(names, ",")
}
