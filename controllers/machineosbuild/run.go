package machineosbuild

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/buildinputs"
	"github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/internal/status"
)

// runBuild drives a build that is not finished yet with the strategy its
// inputs allow, and copies its progress into the build's status (which
// the reconcile writes once, in its deferred patch).
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
		image := buildinputs.Repository(b.Spec.RenderedImagePushSpec) + "@" + st.Digest
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
	inputs, jb, err := job.Objects(r.Config.Job, req)
	if err != nil {
		return job.Status{Phase: job.PhaseFailed, Failure: &v1alpha1.BuildFailure{Step: v1alpha1.BuildStepPrepare, Message: err.Error()}}, "", nil
	}
	for _, labels := range []map[string]string{inputs.Labels, jb.Labels, jb.Spec.Template.Labels} {
		labels[v1alpha1.MachineOSConfigLabel] = s.mosc.Name
	}
	if err := r.Client.Create(ctx, inputs); err != nil && !apierrors.IsAlreadyExists(err) {
		return job.Status{}, "", fmt.Errorf("create Secret %s/%s: %w", inputs.Namespace, inputs.Name, err)
	}
	created, err := r.createOrGet(ctx, jb)
	if err != nil {
		return job.Status{}, "", err
	}
	switch {
	case created:
		log.FromContext(ctx).Info("Created Job", "build", b.Name, "job", jb.Name, "pushSpec", pushSpec)
		r.Recorder.Eventf(b, jb, corev1.EventTypeNormal, "JobCreated", "Build", "Created Job %s/%s", jb.Namespace, jb.Name)
	case !jb.DeletionTimestamp.IsZero() || !metav1.IsControlledBy(jb, b):
		// The Job of an earlier attempt or an earlier build of the same
		// name (one made from a stale cache just as that build was
		// deleted): it goes, and its deletion brings the next reconcile,
		// which makes this one's. Made before a restart, it is adopted.
		if jb.DeletionTimestamp.IsZero() {
			if err := deleteBuildJob(ctx, r.Client, r.Config.Namespace, b); err != nil {
				return job.Status{}, "", err
			}
		}
		s.requeue(time.Second)
		return job.Status{Phase: job.PhasePending}, jb.Name, nil
	}
	own, err := r.podsOf(ctx, jb, job.PodLabels(b.Name))
	if err != nil {
		return job.Status{}, "", err
	}
	st := job.Interpret(jb, own)
	if st.RetryAfter > 0 {
		s.requeue(st.RetryAfter)
	}
	if st.StopJob {
		// The pod cannot start: stop the Job, which would wait for it
		// until its deadline.
		if err := r.deleteJobs(ctx, b); err != nil {
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
	if IsTrue(b, v1alpha1.BuildBuilding) && !IsTrue(s.buildBefore, v1alpha1.BuildBuilding) {
		s.afterWrite(func() {
			r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, v1alpha1.BuildBuilding, "Build", "Building in Job %s/%s", r.Config.Namespace, jobName)
		})
	}
}

// FindStage returns the build's status entry of a stage, or nil.
func FindStage(b *v1alpha1.MachineOSBuild, name v1alpha1.BuildStage) *v1alpha1.BuildStageStatus {
	for i := range b.Status.Stages {
		if b.Status.Stages[i].Name == name {
			return &b.Status.Stages[i]
		}
	}
	return nil
}

// stageStatus returns the build's status entry of a stage, adding it.
func stageStatus(b *v1alpha1.MachineOSBuild, name v1alpha1.BuildStage) *v1alpha1.BuildStageStatus {
	if st := FindStage(b, name); st != nil {
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
		msg = FailureMessage(failure)
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

// FailureMessage is the one-line account of a failure used in conditions.
func FailureMessage(f *v1alpha1.BuildFailure) string {
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

// deleteJobs deletes a build's Jobs (with their pods) and Secret: the
// build Job and the boot disk Job.
func (r *Reconciler) deleteJobs(ctx context.Context, b *v1alpha1.MachineOSBuild) error {
	return deleteJobs(ctx, r.Client, r.Config.Namespace, b)
}

func deleteJobs(ctx context.Context, c client.Client, namespace string, b *v1alpha1.MachineOSBuild) error {
	if err := deleteBuildJob(ctx, c, namespace, b); err != nil {
		return err
	}
	return deleteDiskJob(ctx, c, namespace, b)
}

// deleteBuildJob deletes a build's build Job (with its pods) and Secret.
func deleteBuildJob(ctx context.Context, c client.Client, namespace string, b *v1alpha1.MachineOSBuild) error {
	name := job.JobName(b.Name)
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	jb := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Delete(ctx, jb, background); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Job %s: %w", name, err)
	}
	inputs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Delete(ctx, inputs); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secret %s: %w", name, err)
	}
	return nil
}

// DeleteBuild deletes a build with its Jobs and their Secret. The
// MachineOSConfig reconciler decides when a build goes (a rebuild, a
// lost image, garbage collection, its MachineOSConfig deleted); the Jobs
// go first, since nothing else would delete them (their owner reference
// needs a garbage collector, which a test cluster may not run).
func DeleteBuild(ctx context.Context, c client.Client, namespace string, b *v1alpha1.MachineOSBuild) error {
	if err := deleteJobs(ctx, c, namespace, b); err != nil {
		return err
	}
	if err := c.Delete(ctx, b, client.Preconditions{UID: &b.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete MachineOSBuild %s: %w", b.Name, err)
	}
	return nil
}
