package build

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/internal/buildinputs"
	"github.com/strata-dev/strata/internal/history"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/retry"
	"github.com/strata-dev/strata/internal/status"
)

// finalizer lets the controller delete a MachineOSConfig's builds, Jobs
// and their Secrets before the MachineOSConfig goes.
const finalizer = v1alpha1.Prefix + "build-cleanup"

// Reconciler reconciles MachineOSConfigs: which build serves the pool's
// current inputs, and the MachineOSConfig's status.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Config   Config
	Registry registry.Client

	retries retry.Backoff
}

// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineosconfigs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineosconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineosconfigs/finalizers,verbs=update
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineosbuilds,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineosbuilds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineosbuilds/finalizers,verbs=update
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,namespace=strata-system,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=secrets,verbs=get;list;watch;create;delete

// CacheByObject limits the manager's cache of the namespaced kinds this
// controller reads to its namespace, so it neither needs nor holds
// cluster-wide access to Secrets, Pods or Jobs.
func CacheByObject(namespace string) map[client.Object]cache.ByObject {
	only := cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}}
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}: only,
		&corev1.Pod{}:    only,
		&batchv1.Job{}:   only,
	}
}

// Field indexes of the manager's cache, so that an event finds the few
// objects it concerns without listing them all.
const (
	// secretIndex: MachineOSConfigs by the Secrets they name.
	secretIndex = "strata.build.secrets"
	// poolIndex: MachineOSConfigs by the pool they layer.
	poolIndex = "strata.build.pool"
	// nodeImageIndex: Nodes by the images they run, are to run, or
	// booted first.
	nodeImageIndex = "strata.build.nodeImage"
	// layeredByIndex: pools by the MachineOSConfig that claimed them.
	layeredByIndex = "strata.build.layeredBy"
)

// SetupWithManager registers the MachineOSConfig reconciler and the
// MachineOSBuild reconciler (controllers/machineosbuild) it hands each
// build to, with one configuration. A MachineOSConfig is reconciled when
// it changes, when its builds change, when its pool changes, and when a
// Secret it names changes (a missing Secret may have been created).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	cfg, err := r.Config.withDefaults()
	if err != nil {
		return fmt.Errorf("build controller configuration: %w", err)
	}
	r.Config = cfg
	if r.Registry.Insecure == nil {
		r.Registry.Insecure = cfg.InsecureRegistries
	}
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.MachineOSConfig{}, secretIndex, secretsOf); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1alpha1.MachineOSConfig{}, poolIndex, func(o client.Object) []string {
		return []string{o.(*v1alpha1.MachineOSConfig).Spec.MachineConfigPool.Name}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &corev1.Node{}, nodeImageIndex, imagesOfNode); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1alpha1.MachineConfigPool{}, layeredByIndex, func(o client.Object) []string {
		if m := o.GetAnnotations()[v1alpha1.LayeredByAnnotation]; m != "" {
			return []string{m}
		}
		return nil
	}); err != nil {
		return err
	}
	builds := &machineosbuild.Reconciler{Client: r.Client, Recorder: r.Recorder, Registry: r.Registry, Config: cfg.buildConfig()}
	if err := builds.SetupWithManager(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("build").
		// Pools are independent; one with a slow registry must not hold
		// up the others.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&v1alpha1.MachineOSConfig{}).
		Owns(&v1alpha1.MachineOSBuild{}).
		Watches(&v1alpha1.MachineConfigPool{}, r.configsBy(poolIndex, "pool"), builder.WithPredicates(poolChanged())).
		Watches(&corev1.Secret{}, r.configsBy(secretIndex, "Secret")).
		Complete(r)
}

// poolChanged passes the pool changes a build depends on: a new rendered
// configuration, a claim taken or released, a spec change (for the
// condition's observedGeneration), deletion. The rollout's machine
// counts and the conditions other controllers write reconcile nothing.
func poolChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*v1alpha1.MachineConfigPool), e.ObjectNew.(*v1alpha1.MachineConfigPool)
			return o.Status.Configuration.Name != n.Status.Configuration.Name ||
				o.Annotations[v1alpha1.LayeredByAnnotation] != n.Annotations[v1alpha1.LayeredByAnnotation] ||
				o.Generation != n.Generation || !n.DeletionTimestamp.Equal(o.DeletionTimestamp)
		},
	}
}

// configsBy maps an object to the MachineOSConfigs an index files under
// its name. The cache answers, so a failure is rare, but it is logged:
// a dropped event would leave a MachineOSConfig waiting for the next.
func (r *Reconciler) configsBy(index, kind string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list v1alpha1.MachineOSConfigList
		if err := r.Client.List(ctx, &list, client.MatchingFields{index: o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "Cannot find the MachineOSConfigs of a changed object", "kind", kind, "name", o.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, len(list.Items))
		for i := range list.Items {
			reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
		}
		return reqs
	})
}

// secretsOf are the names of the Secrets a MachineOSConfig names.
func secretsOf(o client.Object) []string {
	return buildinputs.Secrets(&o.(*v1alpha1.MachineOSConfig).Spec)
}

// imagesOfNode are the images a node runs, is to run, or booted before
// Strata first changed it (originalImage, where the node goes back when
// its pool stops being layered, which may be an image Strata built), and
// the image it booted when a live apply made the staged one current
// (bootedImage).
func imagesOfNode(o client.Object) []string {
	var images []string
	for _, a := range []string{v1alpha1.CurrentImageAnnotation, v1alpha1.DesiredImageAnnotation, v1alpha1.OriginalImageAnnotation, v1alpha1.BootedImageAnnotation} {
		if v := o.GetAnnotations()[a]; v != "" {
			images = append(images, v)
		}
	}
	return images
}

// scope is what one reconcile of a MachineOSConfig learns.
type scope struct {
	mosc *v1alpha1.MachineOSConfig
	pool *v1alpha1.MachineConfigPool
	// in are the current inputs, and name the name of their build.
	in   *inputs
	name string
	// build is the build of the current inputs.
	build *v1alpha1.MachineOSBuild
	// done ends the sequence of phases: nothing more is due now.
	done bool
	// problem is why the inputs cannot be built; nil when they can.
	problem *problem
	// waiting says what the build waits for (a rendered config).
	waiting string
	// overrides says whose osImageURL the MachineOSConfig's base image
	// overrides; "" when it overrides none.
	overrides string
	pushKC    authn.Keychain
	baseKC    authn.Keychain
	// after is when to reconcile again at the latest (0: only on events).
	after time.Duration
	// removeAnnotations are requests (rebuild, resolve-base) handled in
	// this reconcile, taken off the MachineOSConfig at its end.
	removeAnnotations []string
	// missing is the current image when the registry no longer has it.
	missing string
	// retry is set when a step failed and is tried again.
	retry *retry.Attempt
}

// requeue asks for a reconcile within d.
func (s *scope) requeue(d time.Duration) {
	if s.after == 0 || d < s.after {
		s.after = d
	}
}

type problem struct {
	reason, message string
}

// Reconcile is level-based: it computes the build the current inputs
// call for and moves the world towards it, so a restart at any point
// (even with a Job running) adopts what exists rather than duplicating it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return status.QuietConflict(ctx, res, err)
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	mosc := &v1alpha1.MachineOSConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, mosc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mosc.DeletionTimestamp.IsZero() {
		r.retries.Forget(mosc.Name)
		return ctrl.Result{}, r.finalize(ctx, mosc)
	}
	if controllerutil.AddFinalizer(mosc, finalizer) {
		return ctrl.Result{}, r.Client.Update(ctx, mosc)
	}
	before := mosc.DeepCopy()
	s := &scope{mosc: mosc}
	// The status is written on every path, also when a step failed, so
	// that it says what is being retried; not after a conflict, whose
	// reconcile comes again at once from a fresh read.
	defer func() {
		if !apierrors.IsConflict(retErr) {
			retErr = errors.Join(retErr, r.writeStatus(ctx, s, before))
		}
	}()
	var err error
	for _, p := range r.phases() {
		if err = p(ctx, s); err != nil || s.done {
			break
		}
	}
	switch {
	case apierrors.IsConflict(err):
		// Someone wrote first: read again at once, saying nothing.
		return ctrl.Result{}, err
	case err != nil:
		// What failed may heal by itself (a registry or the API server
		// that did not answer). The status says so and when the next try
		// is, and the try comes on the controller's own bounded backoff,
		// not the work queue's, which grows to minutes.
		s.retry = r.retries.Fail(mosc.Name, err, r.Config.MaxRetryDelay.Duration, time.Now())
		s.requeue(s.retry.After)
		log.FromContext(ctx).Info("Reconcile failed; trying again", "error", err.Error(), "after", s.retry.After)
	default:
		r.retries.Forget(mosc.Name)
	}
	if s.problem != nil && s.problem.reason == v1alpha1.ReasonBaseUnreachable {
		s.requeue(r.Config.MaxRetryDelay.Duration)
	}
	return ctrl.Result{RequeueAfter: s.after}, nil
}

// writeStatus writes the MachineOSConfig's status, then the pool's
// ImageBuildDegraded condition, then takes the handled annotations off.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope, before *v1alpha1.MachineOSConfig) error {
	mosc := s.mosc
	setConfigStatus(s)
	logProblem(ctx, before, mosc)
	if err := status.Patch(ctx, r.Client, before, mosc); err != nil {
		return fmt.Errorf("patch status of MachineOSConfig %s: %w", mosc.Name, err)
	}
	r.eventMissing(s, before)
	if err := r.setPoolStatus(ctx, s); err != nil {
		return err
	}
	// Last: a metadata write before the status patch would make that
	// patch's optimistic lock fail.
	if len(s.removeAnnotations) > 0 {
		patch := client.MergeFrom(mosc.DeepCopy())
		for _, a := range s.removeAnnotations {
			delete(mosc.Annotations, a)
		}
		if err := r.Client.Patch(ctx, mosc, patch); err != nil {
			return fmt.Errorf("remove handled annotations of MachineOSConfig %s: %w", mosc.Name, err)
		}
	}
	return nil
}

// phase is one step of a MachineOSConfig's reconcile. It returns at
// once when its part is done or not due, sets s.done when no later phase
// is due, and returns an error for what may heal by itself.
type phase func(ctx context.Context, s *scope) error

// phases are the steps of a MachineOSConfig's reconcile, in order: the
// inputs (claim of the pool, Secrets, rendered config, base pin and
// verification), a rebuild asked for, which build serves the current
// inputs (and which are asked to stop), whether its image is still there,
// the admin stage it recorded, and garbage collection.
func (r *Reconciler) phases() []phase {
	return []phase{r.gatherInputs, r.rebuild, r.reconcileBuilds, r.checkImage, r.recordAdminStage, r.collectGarbage}
}

// reconcileBuilds finds or makes the build of the current inputs, asks
// every other build that has not ended to stop, and deletes the builds
// of an earlier MachineOSConfig of the same name. The builds themselves
// are the MachineOSBuild reconciler's to run.
func (r *Reconciler) reconcileBuilds(ctx context.Context, s *scope) error {
	name, in := s.name, s.in
	builds, err := r.buildsOf(ctx, s.mosc.Name)
	if err != nil {
		return err
	}
	// A build of an earlier MachineOSConfig of the same name (deleted and
	// made again while its builds ran, faster than they were cleaned up)
	// is not this one's to continue: it goes, with its Job.
	mine := builds[:0]
	for i := range builds {
		if !metav1.IsControlledBy(&builds[i], s.mosc) {
			log.FromContext(ctx).Info("Deleting a build of an earlier MachineOSConfig of the same name", "build", builds[i].Name)
			if err := r.deleteBuild(ctx, &builds[i]); err != nil {
				return err
			}
			continue
		}
		mine = append(mine, builds[i])
	}
	builds = mine
	for i := range builds {
		b := &builds[i]
		switch _, asked := b.Annotations[v1alpha1.InterruptAnnotation]; {
		case b.Name == name:
			s.build = b
			if asked {
				// Its inputs are current again (a change reverted): no
				// build of the current inputs waits on one that ended, so
				// the MachineOSBuild reconciler starts an interrupted one
				// again.
				if err := r.setInterrupt(ctx, b, ""); err != nil {
					return err
				}
			}
		case !asked && !machineosbuild.Terminal(b):
			if err := r.setInterrupt(ctx, b, name); err != nil {
				return err
			}
		}
	}
	if s.build == nil {
		return r.createBuild(ctx, s, name, in)
	}
	return nil
}

// checkImage checks that the succeeded build of the current inputs still
// has its image in the registry.
func (r *Reconciler) checkImage(ctx context.Context, s *scope) error {
	if b := s.build; machineosbuild.IsTrue(b, v1alpha1.BuildSucceeded) {
		image := b.Status.DigestedImagePushSpec
		ok, err := r.Registry.Exists(ctx, image, s.pushKC)
		if err != nil {
			return err
		}
		switch {
		case !ok && image == s.mosc.Status.CurrentImagePullSpec:
			// The image nodes are to run is gone. A rebuild would roll a
			// new image to every node for no change of theirs (and one
			// whose RUN steps fetch something would differ), on the word
			// of a 404 that may be the registry's mistake: it is
			// reported, checked again, and rebuilt only when asked.
			s.missing = image
			s.requeue(r.Config.MaxRetryDelay.Duration)
		case !ok:
			// An older build's image, which the inputs went back to, is
			// gone: build it again, since nodes get a new image anyway.
			log.FromContext(ctx).Info("Image gone from the registry, building again", "build", b.Name, "image", image)
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "ImageGone", "Rebuild",
				"%s", status.Truncate("Image "+image+" is no longer in the registry; building again", 1024))
			// Deleting an owned build brings the next reconcile.
			s.done = true
			return r.deleteBuild(ctx, b)
		}
	}
	return nil
}

// createBuild makes the build of the current inputs; the MachineOSBuild
// reconciler writes its status, Prepared first.
func (r *Reconciler) createBuild(ctx context.Context, s *scope, name string, in *inputs) error {
	b := &v1alpha1.MachineOSBuild{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				v1alpha1.MachineOSConfigLabel: s.mosc.Name,
				v1alpha1.PoolLabel:            s.pool.Name,
			},
			Annotations: map[string]string{v1alpha1.CreatedAnnotation: history.Stamp()},
		},
		Spec: v1alpha1.MachineOSBuildSpec{
			MachineConfig:         v1alpha1.LocalObjectReference{Name: in.Rendered.Name},
			MachineOSConfig:       v1alpha1.LocalObjectReference{Name: s.mosc.Name},
			RenderedImagePushSpec: buildinputs.PushSpec(s.mosc, name),
		},
	}
	if err := controllerutil.SetControllerReference(s.mosc, b, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, b); err != nil {
		return fmt.Errorf("create MachineOSBuild %s: %w", name, err)
	}
	log.FromContext(ctx).Info("Created build", "build", name, "renderedConfig", in.Rendered.Name, "base", in.Base, "inputsHash", in.Hash)
	s.build = b
	return nil
}

// setInterrupt asks a build to stop, naming the build that replaces it
// (the interrupt annotation, which the MachineOSBuild reconciler acts
// on), or with newer "" takes the request back.
func (r *Reconciler) setInterrupt(ctx context.Context, b *v1alpha1.MachineOSBuild, newer string) error {
	patch := client.MergeFrom(b.DeepCopy())
	if newer == "" {
		delete(b.Annotations, v1alpha1.InterruptAnnotation)
	} else {
		if b.Annotations == nil {
			b.Annotations = map[string]string{}
		}
		b.Annotations[v1alpha1.InterruptAnnotation] = newer
	}
	if err := r.Client.Patch(ctx, b, patch); err != nil {
		return fmt.Errorf("annotate MachineOSBuild %s: %w", b.Name, err)
	}
	if newer == "" {
		log.FromContext(ctx).Info("Inputs current again, the build goes on", "build", b.Name)
	} else {
		log.FromContext(ctx).Info("Asked the build to stop", "build", b.Name, "newer", newer)
	}
	return nil
}

// deleteBuild deletes a build with its Jobs and their Secret.
func (r *Reconciler) deleteBuild(ctx context.Context, b *v1alpha1.MachineOSBuild) error {
	return machineosbuild.DeleteBuild(ctx, r.Client, r.Config.Namespace, b)
}

func (r *Reconciler) buildsOf(ctx context.Context, mosc string) ([]v1alpha1.MachineOSBuild, error) {
	var list v1alpha1.MachineOSBuildList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{v1alpha1.MachineOSConfigLabel: mosc}); err != nil {
		return nil, fmt.Errorf("list builds of %s: %w", mosc, err)
	}
	return list.Items, nil
}

// rebuild makes this reconcile build the current inputs anew: a finished
// build of them is deleted, and the annotation is taken off at the end of
// the reconcile.
func (r *Reconciler) rebuild(ctx context.Context, s *scope) error {
	if _, ok := s.mosc.Annotations[v1alpha1.RebuildAnnotation]; !ok {
		return nil
	}
	name := s.name
	s.removeAnnotations = append(s.removeAnnotations, v1alpha1.RebuildAnnotation)
	b := &v1alpha1.MachineOSBuild{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: name}, b); {
	case err == nil && machineosbuild.Terminal(b):
		if err := r.deleteBuild(ctx, b); err != nil {
			return err
		}
		log.FromContext(ctx).Info("Rebuilding as asked", "build", name)
		r.Recorder.Eventf(s.mosc, nil, corev1.EventTypeNormal, "Rebuild", "Rebuild", "Rebuilding %s as asked by the %s annotation", name, v1alpha1.RebuildAnnotation)
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	return nil
}

// finalize deletes a MachineOSConfig's builds with their Jobs and
// Secrets. Images stay in the registry: nodes may still run them until
// they roll back.
func (r *Reconciler) finalize(ctx context.Context, mosc *v1alpha1.MachineOSConfig) error {
	builds, err := r.buildsOf(ctx, mosc.Name)
	if err != nil {
		return err
	}
	for i := range builds {
		if err := r.deleteBuild(ctx, &builds[i]); err != nil {
			return err
		}
	}
	if err := r.releasePools(ctx, mosc); err != nil {
		return err
	}
	if controllerutil.RemoveFinalizer(mosc, finalizer) {
		return r.Client.Update(ctx, mosc)
	}
	return nil
}

// eventMissing says, once when it is found, that the current image is
// gone from the registry.
func (r *Reconciler) eventMissing(s *scope, before *v1alpha1.MachineOSConfig) {
	if s.missing == "" {
		return
	}
	if was := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.ConfigDegraded); was != nil && was.Reason == v1alpha1.ReasonCurrentImageMissing {
		return
	}
	// An Event's note takes at most 1 KiB, and an image name alone may.
	r.Recorder.Eventf(s.mosc, s.build, corev1.EventTypeWarning, v1alpha1.ReasonCurrentImageMissing, "Check", "%s", status.Truncate(fmt.Sprintf(
		"Image %s of build %s, which the pool's nodes are to run, is not in the registry; it is not rebuilt unless asked (annotation %s)",
		s.missing, s.build.Name, v1alpha1.RebuildAnnotation), 1024))
}

// logProblem logs a change of what keeps the MachineOSConfig from being
// built, once per change, not on every reconcile.
func logProblem(ctx context.Context, before, after *v1alpha1.MachineOSConfig) {
	was := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.ConfigDegraded)
	now := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.ConfigDegraded)
	if now == nil || (was != nil && was.Status == now.Status && was.Reason == now.Reason) {
		return
	}
	if now.Status == metav1.ConditionTrue {
		log.FromContext(ctx).Info("Cannot build", "reason", now.Reason, "message", now.Message)
	} else if was != nil && was.Status == metav1.ConditionTrue {
		log.FromContext(ctx).Info("Can build again", "previousReason", was.Reason)
	}
}
