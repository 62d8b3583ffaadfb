package machineosbuild

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/diskjob"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/buildinputs"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/retry"
	"github.com/strata-dev/strata/internal/status"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "machineosbuild"

// Reconciler takes each MachineOSBuild through its phases.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Registry registry.Client
	Config   Config

	retries retry.Backoff
}

// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineosbuilds,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineosbuilds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineosconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,namespace=strata-system,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=secrets,verbs=get;list;watch;create;delete

// Field indexes of the manager's cache.
const (
	// labelIndex: MachineOSBuilds by the label value their Jobs' pods
	// carry (job.LabelValue of the build's name).
	labelIndex = "strata.machineosbuild.label"
	// secretIndex: MachineOSConfigs by the Secrets their builds read.
	secretIndex = "strata.machineosbuild.secrets"
)

// SetupWithManager registers the reconciler. A build is reconciled when
// it changes, when its Jobs or their pods change, when its
// MachineOSConfig changes (its spec, its pinned base, its asking), and
// when a Secret its MachineOSConfig names changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.MachineOSBuild{}, labelIndex, func(o client.Object) []string {
		return []string{job.LabelValue(o.GetName())}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1alpha1.MachineOSConfig{}, secretIndex, func(o client.Object) []string {
		return buildinputs.Secrets(&o.(*v1alpha1.MachineOSConfig).Spec)
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// Builds are independent; one with a slow registry must not hold
		// up the others.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&v1alpha1.MachineOSBuild{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, r.buildsOfPod()).
		Watches(&v1alpha1.MachineOSConfig{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.buildsOf(ctx, o.GetName())
		})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var list v1alpha1.MachineOSConfigList
			if err := r.Client.List(ctx, &list, client.MatchingFields{secretIndex: o.GetName()}); err != nil {
				log.FromContext(ctx).Error(err, "Cannot find the MachineOSConfigs of a changed Secret", "name", o.GetName())
				return nil
			}
			var reqs []reconcile.Request
			for i := range list.Items {
				reqs = append(reqs, r.buildsOf(ctx, list.Items[i].Name)...)
			}
			return reqs
		})).
		Complete(r)
}

// buildsOfPod maps a build pod or a boot disk pod to its build, by the
// label both carry.
func (r *Reconciler) buildsOfPod() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		for _, label := range []string{job.LabelMachineOSBuild, diskjob.LabelBootDisk} {
			v := o.GetLabels()[label]
			if v == "" {
				continue
			}
			var list v1alpha1.MachineOSBuildList
			if err := r.Client.List(ctx, &list, client.MatchingFields{labelIndex: v}); err != nil {
				log.FromContext(ctx).Error(err, "Cannot find the build of a changed pod", "pod", o.GetName())
				continue
			}
			for i := range list.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
			}
		}
		return reqs
	})
}

// buildsOf are the requests of a MachineOSConfig's builds. The cache
// answers, so a failure is rare, but it is logged: a dropped event would
// leave a build waiting for the next.
func (r *Reconciler) buildsOf(ctx context.Context, mosc string) []reconcile.Request {
	var list v1alpha1.MachineOSBuildList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{v1alpha1.MachineOSConfigLabel: mosc}); err != nil {
		log.FromContext(ctx).Error(err, "Cannot find the builds of a changed MachineOSConfig", "machineOSConfig", mosc)
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return reqs
}

// scope is what one reconcile of a build learns and changes.
type scope struct {
	build *v1alpha1.MachineOSBuild
	// buildBefore is build as read: the phases change build's status in
	// memory, and it is written against this once, in a deferred patch.
	buildBefore *v1alpha1.MachineOSBuild
	// written are what is said and counted once the status is written.
	written []func()
	// done ends the sequence of phases: nothing more is due now.
	done bool
	// after is when to reconcile again at the latest (0: only on events).
	after time.Duration

	// Set by the inputs phase, for a build of the current inputs.
	mosc   *v1alpha1.MachineOSConfig
	pool   string
	in     *inputs
	pushKC authn.Keychain
	baseKC authn.Keychain
}

// inputs is everything a build is made from.
type inputs = buildinputs.Inputs

// afterWrite runs fn once the build's status is written.
func (s *scope) afterWrite(fn func()) { s.written = append(s.written, fn) }

// requeue asks for a reconcile within d.
func (s *scope) requeue(d time.Duration) {
	if s.after == 0 || d < s.after {
		s.after = d
	}
}

// phase is one step of a build. It returns at once when its part is
// done or not due, sets s.done when no later phase is due, and returns
// an error for what may heal by itself.
type phase func(ctx context.Context, s *scope) error

// phases are a build's steps, in order (doc.go).
func (r *Reconciler) phases() []phase {
	return []phase{r.sweep, r.stop, r.loadInputs, r.restart, r.prepare, r.run, r.signImage, r.bootDisk}
}

// Reconcile is level-based: a restart at any point (even with a Job
// running) adopts what exists rather than duplicating it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return status.QuietConflict(ctx, res, err)
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	b := &v1alpha1.MachineOSBuild{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// A build that is gone leaves no Job: DeleteBuild deleted them
		// first, but a reconcile that read the build from the cache just
		// before may have made one since, whose event brings this
		// request. Reconciles of one name do not overlap, so no Job of a
		// newer build of that name exists yet.
		r.retries.Forget(req.Name)
		ns := r.Config.Namespace
		left := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.JobName(req.Name)}, &batchv1.Job{}) == nil ||
			r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.JobName(req.Name)}, &corev1.Secret{}) == nil ||
			r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: diskjob.JobName(req.Name)}, &batchv1.Job{}) == nil
		if !left {
			return ctrl.Result{}, nil
		}
		gone := &v1alpha1.MachineOSBuild{ObjectMeta: metav1.ObjectMeta{Name: req.Name}}
		return ctrl.Result{}, deleteJobs(ctx, r.Client, ns, gone)
	}
	if !b.DeletionTimestamp.IsZero() {
		// Deleted with its Jobs (DeleteBuild).
		return ctrl.Result{}, nil
	}
	s := &scope{build: b, buildBefore: b.DeepCopy()}
	// One status write, on every path: a phase that failed leaves what
	// the others did, and says what is retried.
	defer func() {
		if err := status.Patch(ctx, r.Client, s.buildBefore, s.build); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("patch status of MachineOSBuild %s: %w", b.Name, err))
			return
		}
		for _, fn := range s.written {
			fn()
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
		// that did not answer); the try comes on the controller's own
		// bounded backoff, not the work queue's, which grows to minutes.
		a := r.retries.Fail(b.Name, err, r.Config.MaxRetryDelay, time.Now())
		s.requeue(a.After)
		log.FromContext(ctx).Info("Reconcile failed; trying again", "error", err.Error(), "after", a.After)
	default:
		r.retries.Forget(b.Name)
	}
	return ctrl.Result{RequeueAfter: s.after}, nil
}
