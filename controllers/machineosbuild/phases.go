package machineosbuild

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/buildinputs"
	"github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/internal/registry"
)

// sweep deletes the build Job and Secret of a build whose end is written:
// they would only hold the build's inputs and pods. Only once the end is
// written: a Job deleted before would be made again, and a finished build
// run again, if that write were lost. The cache answers, so a sweep that
// finds nothing costs no request. A succeeded build's boot disk Job stays:
// it is the bootdisk phase's.
func (r *Reconciler) sweep(ctx context.Context, s *scope) error {
	b := s.buildBefore
	if !Terminal(b) {
		return nil
	}
	key := client.ObjectKey{Namespace: r.Config.Namespace, Name: job.JobName(b.Name)}
	jobLeft := r.Client.Get(ctx, key, &batchv1.Job{}) == nil
	secretLeft := r.Client.Get(ctx, key, &corev1.Secret{}) == nil
	if !jobLeft && !secretLeft {
		return nil
	}
	if err := deleteBuildJob(ctx, r.Client, r.Config.Namespace, b); err != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("Deleted the Job of an ended build", "build", b.Name)
	return nil
}

// stop ends a build the MachineOSConfig asked to stop (the interrupt
// annotation): its inputs are no longer current. Its Jobs go, and it is
// Interrupted; a build that ended already stays as it ended. Nothing else
// is done for a build asked to stop.
func (r *Reconciler) stop(ctx context.Context, s *scope) error {
	b := s.build
	newer, asked := b.Annotations[v1alpha1.InterruptAnnotation]
	if !asked {
		return nil
	}
	s.done = true
	if Terminal(b) {
		return nil
	}
	if err := r.deleteJobs(ctx, b); err != nil {
		return err
	}
	now := metav1.Now()
	b.Status.BuildEnd = &now
	msg := "The inputs changed; build " + newer + " replaces this one"
	setBuildConditions(b, stateInterrupted, msg)
	s.afterWrite(func() {
		observe(b, stateInterrupted)
		log.FromContext(ctx).Info("Build interrupted", "build", b.Name, "newer", newer)
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, v1alpha1.BuildInterrupted, "Interrupt", "%s", msg)
	})
	return nil
}

// loadInputs reads what the build is made of: its MachineOSConfig, the
// rendered config it names, the base pinned in the MachineOSConfig's
// status, and the Secrets the MachineOSConfig names. A build whose inputs
// are not the MachineOSConfig's current ones (the hash in its name) is
// left alone: the MachineOSConfig reconciler stops it, deletes it, or
// pins the base it was made for, which brings the next reconcile. So is
// a build of an earlier MachineOSConfig of the same name, which goes.
func (r *Reconciler) loadInputs(ctx context.Context, s *scope) error {
	b := s.build
	if IsTrue(b, v1alpha1.BuildFailed) {
		// Nothing runs until the inputs change or a rebuild is asked for.
		s.done = true
		return nil
	}
	mosc := &v1alpha1.MachineOSConfig{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: b.Spec.MachineOSConfig.Name}, mosc); err != nil {
		if apierrors.IsNotFound(err) {
			s.done = true
			return nil
		}
		return err
	}
	if !mosc.DeletionTimestamp.IsZero() || !metav1.IsControlledBy(b, mosc) || mosc.Status.BaseImage == nil {
		s.done = true
		return nil
	}
	rendered := &v1alpha1.MachineConfig{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: b.Spec.MachineConfig.Name}, rendered); err != nil {
		if apierrors.IsNotFound(err) {
			s.done = true
			return nil
		}
		return err
	}
	pool := b.Labels[v1alpha1.PoolLabel]
	in, err := buildinputs.Compute(buildinputs.Sources{
		MOSC:         mosc,
		Pool:         pool,
		Rendered:     rendered,
		Base:         mosc.Status.BaseImage.DigestedPullSpec,
		Arch:         r.Config.Arch,
		BuilderImage: r.Config.BuilderImage,
	})
	if err != nil || buildinputs.BuildName(mosc, in.Hash) != b.Name {
		// Invalid inputs are the MachineOSConfig's to report.
		log.FromContext(ctx).V(1).Info("The build's inputs are not the MachineOSConfig's", "build", b.Name)
		s.done = true
		return nil
	}
	s.mosc, s.pool, s.in = mosc, pool, in
	if s.baseKC, err = r.keychain(ctx, mosc.Spec.BaseImagePullSecret); err != nil {
		return err
	}
	pushRef := mosc.Spec.RenderedImagePushSecret
	if s.pushKC, err = r.keychain(ctx, &pushRef); err != nil {
		return err
	}
	return nil
}

// keychain reads a dockerconfigjson Secret a MachineOSConfig names; nil
// is anonymous access. A missing or malformed Secret is the
// MachineOSConfig's to report, by field; here it is retried.
func (r *Reconciler) keychain(ctx context.Context, ref *v1alpha1.SecretReference) (authn.Keychain, error) {
	if ref == nil {
		return registry.Keychain(nil)
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Config.Namespace, Name: ref.Name}, secret); err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", r.Config.Namespace, ref.Name, err)
	}
	return registry.Keychain(secret)
}

// restart starts an interrupted build of the current inputs again (a
// change reverted, so the MachineOSConfig took its interrupt annotation
// off), as a new attempt: its status is that of a build just prepared,
// with the attempt counted, and the run phase runs it at once. Its Jobs
// went when it was interrupted. No build of the current inputs waits on
// one that ended.
func (r *Reconciler) restart(ctx context.Context, s *scope) error {
	b, in := s.build, s.in
	if !IsTrue(b, v1alpha1.BuildInterrupted) {
		return nil
	}
	attempt := max(b.Status.Attempt, 1) + 1
	conditions := b.Status.Conditions
	b.Status = v1alpha1.MachineOSBuildStatus{Conditions: conditions, Attempt: attempt, BaseImagePullSpec: in.Base}
	// A boot disk condition described an attempt that ended.
	meta.RemoveStatusCondition(&b.Status.Conditions, v1alpha1.BuildBootDisk)
	msg := fmt.Sprintf("The inputs are current again: attempt %d of %s on %s", attempt, in.Rendered.Name, in.Base)
	setBuildConditions(b, statePrepared, msg)
	s.afterWrite(func() {
		log.FromContext(ctx).Info("Restarted an interrupted build whose inputs are current again", "build", b.Name, "attempt", attempt)
		metrics.BuildRestarted()
	})
	return nil
}

// prepare writes a new build's first status: Prepared, on the base it is
// built on.
func (r *Reconciler) prepare(_ context.Context, s *scope) error {
	b, in := s.build, s.in
	if meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildPrepared) != nil {
		return nil
	}
	b.Status.BaseImagePullSpec = in.Base
	setBuildConditions(b, statePrepared, "Rendered "+in.Rendered.Name+" on "+in.Base)
	s.afterWrite(func() {
		r.Recorder.Eventf(b, s.mosc, corev1.EventTypeNormal, v1alpha1.BuildPrepared, "Prepare",
			"Prepared build of %s on base %s", in.Rendered.Name, in.Base)
	})
	return nil
}

// run builds a build that has not ended.
func (r *Reconciler) run(ctx context.Context, s *scope) error {
	if Terminal(s.build) {
		return nil
	}
	return r.runBuild(ctx, s, s.in)
}
