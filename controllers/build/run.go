package build

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/attest"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/buildinputs"
	"github.com/strata-dev/strata/internal/history"
	"github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/status"
)

// runBuild drives a build that is not finished yet with the strategy its
// inputs allow, and copies its progress into the build's status (which
// the reconcile writes once, at its end).
func (r *Reconciler) runBuild(ctx context.Context, s *scope, in *inputs) error {
	b := s.build
	b.Status.Strategy, b.Status.StrategyReason = buildinputs.Strategy(s.mosc, in.Result)
	if b.Status.Strategy == v1alpha1.ConfigLayerStrategy {
		return r.runConfigLayer(ctx, s, in)
	}
	return r.runSingleJob(ctx, s, in)
}

// runSingleJob builds the whole image in one Job.
func (r *Reconciler) runSingleJob(ctx context.Context, s *scope, in *inputs) error {
	b := s.build
	st, jobName, err := r.driveJob(ctx, s, job.Request{Result: in.Result, PushSpec: b.Spec.RenderedImagePushSpec})
	if err != nil {
		return err
	}
	stage := stageStatus(b, v1alpha1.BuildStageJob)
	stage.StartTime = st.StartTime
	switch st.Phase {
	case job.PhaseSucceeded:
		image := repository(b.Spec.RenderedImagePushSpec) + "@" + st.Digest
		stage.Image = image
		endStage(stage)
		return r.attachAndFinish(ctx, s, in, image)
	case job.PhaseFailed:
		endStage(stage)
		r.finish(ctx, s, stateFailed, st.Failure, "")
		return nil
	case job.PhaseRunning:
		setBuildConditions(b, stateBuilding, "Job "+jobName+" is building")
	default:
		setBuildConditions(b, statePrepared, "Job "+jobName+" is waiting for its pod")
	}
	r.eventBuilding(s, jobName)
	return nil
}

// driveJob makes sure the Job that builds req.Result and pushes it to
// req.PushSpec exists, with the Secret of its inputs (adopting both after a restart),
// and returns its progress. Inputs that cannot be delivered to a builder
// (a context too large for a Secret) are a failed status: retrying cannot
// help.
func (r *Reconciler) driveJob(ctx context.Context, s *scope, req job.Request) (job.Status, string, error) {
	b := s.build
	req.Build = b
	req.PushSecret = s.mosc.Spec.RenderedImagePushSecret.Name
	pushSpec := req.PushSpec
	if ref := s.mosc.Spec.BaseImagePullSecret; ref != nil {
		req.BaseImagePullSecret = ref.Name
	}
	inputs, jb, err := job.Objects(r.Config.jobConfig(), req)
	if err != nil {
		return job.Status{Phase: job.PhaseFailed, Failure: &v1alpha1.BuildFailure{Step: v1alpha1.BuildStepPrepare, Message: err.Error()}}, "", nil
	}
	for _, labels := range []map[string]string{inputs.Labels, jb.Labels, jb.Spec.Template.Labels} {
		labels[v1alpha1.MachineOSConfigLabel] = s.mosc.Name
	}
	if err := r.Client.Create(ctx, inputs); err != nil && !apierrors.IsAlreadyExists(err) {
		return job.Status{}, "", fmt.Errorf("create Secret %s/%s: %w", inputs.Namespace, inputs.Name, err)
	}
	if err := r.Client.Create(ctx, jb); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return job.Status{}, "", fmt.Errorf("create Job %s/%s: %w", jb.Namespace, jb.Name, err)
		}
		// Made before a restart: adopt it.
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(jb), jb); err != nil {
			return job.Status{}, "", err
		}
		if !jb.DeletionTimestamp.IsZero() || !metav1.IsControlledBy(jb, b) {
			// The Job of an earlier attempt or an earlier build of the
			// same name, on its way out: its deletion brings the next
			// reconcile, which makes this one's.
			s.requeue(time.Second)
			return job.Status{Phase: job.PhasePending}, jb.Name, nil
		}
	} else {
		log.FromContext(ctx).Info("Created Job", "build", b.Name, "job", jb.Name, "pushSpec", pushSpec)
		r.Recorder.Eventf(b, jb, corev1.EventTypeNormal, "JobCreated", "Build", "Created Job %s/%s", jb.Namespace, jb.Name)
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(r.Config.Namespace), client.MatchingLabels(job.PodLabels(b.Name))); err != nil {
		return job.Status{}, "", fmt.Errorf("list pods of Job %s: %w", jb.Name, err)
	}
	// Only this Job's pods: a Job of the same name deleted a moment ago
	// (a rebuild) may still have pods with the same labels.
	var own []corev1.Pod
	for _, p := range pods.Items {
		if metav1.IsControlledBy(&p, jb) {
			own = append(own, p)
		}
	}
	st := job.Interpret(jb, own)
	if st.RetryAfter > 0 {
		s.requeue(st.RetryAfter)
	}
	if st.StopJob {
		// The pod cannot start: stop the Job, which would wait for it
		// until its deadline.
		if err := r.deleteJob(ctx, b); err != nil {
			return job.Status{}, "", err
		}
	}
	b.Status.Builder = &v1alpha1.MachineOSBuilderReference{
		ImageBuilderType: v1alpha1.JobBuilder,
		Job:              &v1alpha1.ObjectReference{Group: batchv1.GroupName, Resource: "jobs", Namespace: jb.Namespace, Name: jb.Name},
	}
	if st.StartTime != nil && b.Status.BuildStart == nil {
		b.Status.BuildStart = st.StartTime
	}
	return st, jb.Name, nil
}

// eventBuilding says once, when the status saying so is written, that a
// build's Job started building.
func (r *Reconciler) eventBuilding(s *scope, jobName string) {
	b := s.build
	if isTrue(b, v1alpha1.BuildBuilding) && !isTrue(s.buildBefore, v1alpha1.BuildBuilding) {
		s.afterWrite(func() {
			r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, v1alpha1.BuildBuilding, "Build", "Building in Job %s/%s", r.Config.Namespace, jobName)
		})
	}
}

// findStage returns the build's status entry of a stage, or nil.
func findStage(b *v1alpha1.MachineOSBuild, name v1alpha1.BuildStage) *v1alpha1.BuildStageStatus {
	for i := range b.Status.Stages {
		if b.Status.Stages[i].Name == name {
			return &b.Status.Stages[i]
		}
	}
	return nil
}

// stageStatus returns the build's status entry of a stage, adding it.
func stageStatus(b *v1alpha1.MachineOSBuild, name v1alpha1.BuildStage) *v1alpha1.BuildStageStatus {
	if st := findStage(b, name); st != nil {
		return st
	}
	b.Status.Stages = append(b.Status.Stages, v1alpha1.BuildStageStatus{Name: name})
	return &b.Status.Stages[len(b.Status.Stages)-1]
}

// endStage records a stage's duration, from its start until now.
func endStage(st *v1alpha1.BuildStageStatus) {
	if st.StartTime == nil {
		now := metav1.Now()
		st.StartTime = &now
	}
	if st.Duration == nil {
		st.Duration = &metav1.Duration{Duration: time.Since(st.StartTime.Time).Round(time.Millisecond)}
	}
}

// finish moves the build to a terminal state, with an event and metrics
// once that state is written.
func (r *Reconciler) finish(ctx context.Context, s *scope, state buildState, failure *v1alpha1.BuildFailure, image string) {
	b := s.build
	now := metav1.Now()
	b.Status.BuildEnd = &now
	if b.Status.BuildStart == nil {
		b.Status.BuildStart = &now
	}
	var msg string
	switch state {
	case stateSucceeded:
		b.Status.DigestedImagePushSpec = image
		msg = "Pushed " + image
	case stateFailed:
		// What a builder or a registry said can be longer than the API
		// takes; the write that says the build failed must not fail.
		b.Status.Failure = job.BoundFailure(failure)
		failure = b.Status.Failure
		msg = failureMessage(failure)
	}
	setBuildConditions(b, state, msg)
	// Said and counted once the state is written: a reconcile that lost a
	// conflict finishes the build again, and must not count it twice.
	s.afterWrite(func() {
		logger := log.FromContext(ctx).WithValues("build", b.Name, "strategy", b.Status.Strategy)
		if state == stateFailed {
			logger.Info("Build failed", "failure", msg)
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, v1alpha1.BuildFailed, "Build", "%s", status.Truncate(msg, 1024))
		} else {
			logger.Info("Build succeeded", "image", image)
			r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, string(state), "Build", "%s", msg)
		}
		observe(b, state)
	})
}

// failureMessage is the one-line account of a failure used in conditions.
func failureMessage(f *v1alpha1.BuildFailure) string {
	if f == nil {
		return "the build failed without saying why"
	}
	msg := fmt.Sprintf("%s failed: %s", f.Step, f.Message)
	if f.Stage != "" {
		msg = fmt.Sprintf("%s stage: %s", f.Stage, msg)
	}
	if tail := strings.TrimSpace(f.LogTail); tail != "" {
		lines := strings.Split(tail, "\n")
		msg += "\nLast lines of the build log:\n" + strings.Join(lines[max(0, len(lines)-10):], "\n")
	}
	return msg
}

// observe counts an ended build and its durations: the whole build's
// and each stage's that ran and ended.
func observe(b *v1alpha1.MachineOSBuild, state buildState) {
	var d time.Duration
	known := b.Status.BuildStart != nil && b.Status.BuildEnd != nil
	if known {
		d = b.Status.BuildEnd.Sub(b.Status.BuildStart.Time)
	}
	var stages []metrics.Stage
	for _, s := range b.Status.Stages {
		if s.Duration != nil {
			stages = append(stages, metrics.Stage{Name: string(s.Name), Duration: s.Duration.Duration, Reused: s.Reused})
		}
	}
	metrics.BuildEnded(string(state), d, known, stages)
}

// interrupt ends a build whose inputs are no longer current and stops its
// Job.
func (r *Reconciler) interrupt(ctx context.Context, b *v1alpha1.MachineOSBuild, newer string) error {
	if err := r.deleteJob(ctx, b); err != nil {
		return err
	}
	before := b.DeepCopy()
	now := metav1.Now()
	b.Status.BuildEnd = &now
	msg := "The inputs changed; build " + newer + " replaces this one"
	setBuildConditions(b, stateInterrupted, msg)
	if err := status.Patch(ctx, r.Client, before, b); err != nil {
		return err
	}
	observe(b, stateInterrupted)
	log.FromContext(ctx).Info("Build interrupted", "build", b.Name, "newer", newer)
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, v1alpha1.BuildInterrupted, "Interrupt", "%s", msg)
	return nil
}

// restart starts an interrupted build of the current inputs again, as a
// new attempt: its status is that of a build just prepared, with the
// attempt counted, and the reconcile runs it at once. Its Job went when
// it was interrupted.
func restart(ctx context.Context, s *scope, in *inputs) {
	b := s.build
	attempt := max(b.Status.Attempt, 1) + 1
	conditions := b.Status.Conditions
	b.Status = v1alpha1.MachineOSBuildStatus{Conditions: conditions, Attempt: attempt, BaseImagePullSpec: in.Base}
	// A boot disk condition described an attempt that ended.
	meta.RemoveStatusCondition(&b.Status.Conditions, v1alpha1.BuildBootDisk)
	msg := fmt.Sprintf("The inputs are current again: attempt %d of %s on %s", attempt, in.Rendered.Name, in.Base)
	setBuildConditions(b, statePrepared, msg)
	log.FromContext(ctx).Info("Restarting an interrupted build whose inputs are current again", "build", b.Name, "attempt", attempt)
	s.afterWrite(func() {
		metrics.BuildRestarted()
	})
}

// sweepJobs deletes the build Jobs and Secrets of builds whose end is
// written: a Job of a terminal build would only hold the build's inputs
// and pods. The cache answers, so a sweep that finds nothing costs no
// request.
func (r *Reconciler) sweepJobs(ctx context.Context, builds []v1alpha1.MachineOSBuild) error {
	for i := range builds {
		b := &builds[i]
		if !terminal(b) {
			continue
		}
		key := client.ObjectKey{Namespace: r.Config.Namespace, Name: job.JobName(b.Name)}
		jobLeft := r.Client.Get(ctx, key, &batchv1.Job{}) == nil
		secretLeft := r.Client.Get(ctx, key, &corev1.Secret{}) == nil
		if !jobLeft && !secretLeft {
			continue
		}
		if err := r.deleteBuildJob(ctx, b); err != nil {
			return err
		}
		log.FromContext(ctx).V(1).Info("Deleted the Job of an ended build", "build", b.Name)
	}
	return nil
}

// deleteJob deletes a build's Jobs (with their pods) and Secret: the
// build Job and the boot disk Job.
func (r *Reconciler) deleteJob(ctx context.Context, b *v1alpha1.MachineOSBuild) error {
	if err := r.deleteBuildJob(ctx, b); err != nil {
		return err
	}
	return r.deleteDiskJob(ctx, b)
}

// deleteBuildJob deletes a build's build Job (with its pods) and Secret.
func (r *Reconciler) deleteBuildJob(ctx context.Context, b *v1alpha1.MachineOSBuild) error {
	name := job.JobName(b.Name)
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	jb := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: r.Config.Namespace, Name: name}}
	if err := r.Client.Delete(ctx, jb, background); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Job %s: %w", name, err)
	}
	inputs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Config.Namespace, Name: name}}
	if err := r.Client.Delete(ctx, inputs); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secret %s: %w", name, err)
	}
	return nil
}

func (r *Reconciler) deleteBuild(ctx context.Context, b *v1alpha1.MachineOSBuild) error {
	if err := r.deleteJob(ctx, b); err != nil {
		return err
	}
	if err := r.Client.Delete(ctx, b, client.Preconditions{UID: &b.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete MachineOSBuild %s: %w", b.Name, err)
	}
	return nil
}

// collectGarbage deletes finished builds beyond the history, newest kept,
// with their images (and the images' referrers) and admin stages unless a
// remaining build has them too; never the current build, nor one whose
// image the MachineOSConfig or any node names as current, desired or
// original.
func (r *Reconciler) collectGarbage(ctx context.Context, s *scope) error {
	builds, err := r.buildsOf(ctx, s.mosc.Name)
	if err != nil {
		return err
	}
	var old []v1alpha1.MachineOSBuild
	for _, b := range builds {
		if b.Name != s.build.Name && terminal(&b) {
			old = append(old, b)
		}
	}
	if len(old) <= r.Config.History {
		return nil
	}
	// Only now, with builds to delete, ask which images nodes use: the
	// index answers for each image without listing every node.
	for i := 0; i < len(old); i++ {
		image := old[i].Status.DigestedImagePushSpec
		used, err := r.imageInUse(ctx, image, s.mosc.Status.CurrentImagePullSpec)
		if err != nil {
			return err
		}
		if used {
			old = slices.Delete(old, i, i+1)
			i--
		}
	}
	if len(old) <= r.Config.History {
		return nil
	}
	slices.SortFunc(old, func(a, b v1alpha1.MachineOSBuild) int { return history.NewestFirst(&a, &b) })
	gone := map[string]bool{}
	for i := r.Config.History; i < len(old); i++ {
		gone[old[i].Name] = true
	}
	// An image is kept while any remaining build has it: reproducible
	// builds of different inputs can share a digest, and builds share
	// admin stages.
	kept := map[string]bool{}
	for i := range builds {
		if gone[builds[i].Name] {
			continue
		}
		kept[builds[i].Status.DigestedImagePushSpec] = true
		if st := findStage(&builds[i], v1alpha1.BuildStageAdmin); st != nil {
			kept[st.Image] = true
		}
	}
	ownRepo := repository(s.mosc.Spec.RenderedImagePushSpec) + "@"
	for i := r.Config.History; i < len(old); i++ {
		b := &old[i]
		var images []string
		if image := b.Status.DigestedImagePushSpec; !kept[image] {
			images = append(images, image)
		}
		// Only an admin stage this MachineOSConfig pushed: never the base.
		if st := findStage(b, v1alpha1.BuildStageAdmin); st != nil && strings.HasPrefix(st.Image, ownRepo) && st.Image != b.Status.BaseImagePullSpec && !kept[st.Image] {
			images = append(images, st.Image)
		}
		for _, image := range images {
			kept[image] = true // deleted once
		}
		for _, image := range images {
			if image == "" {
				continue
			}
			// Referrers first: an image whose referrers could not be
			// deleted is kept with them rather than leaving them behind,
			// describing nothing.
			if err := attest.DeleteReferrers(ctx, r.Registry, image, s.pushKC); err != nil {
				log.FromContext(ctx).Info("Could not delete the referrers of an old image", "build", b.Name, "image", image, "error", err.Error())
				r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "ImageNotDeleted", "GarbageCollect", "Could not delete the referrers of %s, keeping it: %v", image, registry.Explain(err))
				continue
			}
			if err := r.Registry.Delete(ctx, image, s.pushKC); err != nil {
				// The build goes anyway; a registry that refuses deletes
				// keeps the image, which is safe.
				log.FromContext(ctx).Info("Could not delete an old image", "build", b.Name, "image", image, "error", err.Error())
				r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "ImageNotDeleted", "GarbageCollect", "Could not delete %s: %v", image, err)
				continue
			}
			// Never reused again, even if the same digest is pushed
			// anew: a new push is a new build's to record.
			forgetAdminStage(s.mosc, image)
			log.FromContext(ctx).Info("Deleted an old image", "build", b.Name, "image", image)
		}
		if err := r.deleteBuild(ctx, b); err != nil {
			return err
		}
		log.FromContext(ctx).Info("Deleted an old build", "build", b.Name, "history", r.Config.History)
	}
	return nil
}

// imageInUse says whether the MachineOSConfig's current image is image,
// or any node runs it, is to run it, or booted it before Strata changed
// it.
func (r *Reconciler) imageInUse(ctx context.Context, image, current string) (bool, error) {
	if image == "" {
		return false, nil
	}
	if image == current {
		return true, nil
	}
	var list corev1.NodeList
	if err := r.Client.List(ctx, &list, client.MatchingFields{nodeImageIndex: image}, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("find nodes on %s: %w", image, err)
	}
	return len(list.Items) > 0, nil
}

// repository strips the tag of registry/repository:tag.
func repository(spec string) string { return buildinputs.Repository(spec) }
