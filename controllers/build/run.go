package build

import (
	"context"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/history"
	"github.com/strata-dev/strata/internal/status"
)

// runBuild makes sure the build's Secret and Job exist (adopting them
// after a restart) and copies the Job's progress into the build's status.
func (r *Reconciler) runBuild(ctx context.Context, s *scope, in *inputs) error {
	b := s.build
	req := job.Request{
		Build:      b,
		Result:     in.result,
		PushSecret: s.mosc.Spec.RenderedImagePushSecret.Name,
		PushSpec:   b.Spec.RenderedImagePushSpec,
	}
	if ref := s.mosc.Spec.BaseImagePullSecret; ref != nil {
		req.BaseImagePullSecret = ref.Name
	}
	inputs, jb, err := job.Objects(r.Config.jobConfig(), req)
	if err != nil {
		// The inputs cannot be delivered to a builder (a context too
		// large for a Secret): retrying will not help.
		return r.finish(ctx, s, stateFailed, &v1alpha1.BuildFailure{Step: v1alpha1.BuildStepPrepare, Message: err.Error()}, "")
	}
	for _, labels := range []map[string]string{inputs.Labels, jb.Labels, jb.Spec.Template.Labels} {
		labels[v1alpha1.MachineOSConfigLabel] = s.mosc.Name
	}
	if err := r.Client.Create(ctx, inputs); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Secret %s/%s: %w", inputs.Namespace, inputs.Name, err)
	}
	if err := r.Client.Create(ctx, jb); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Job %s/%s: %w", jb.Namespace, jb.Name, err)
		}
		// Made before a restart: adopt it.
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(jb), jb); err != nil {
			return err
		}
	} else {
		r.Recorder.Eventf(b, jb, corev1.EventTypeNormal, "JobCreated", "Build", "Created Job %s/%s", jb.Namespace, jb.Name)
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(r.Config.Namespace), client.MatchingLabels(job.PodLabels(b.Name))); err != nil {
		return fmt.Errorf("list pods of Job %s: %w", jb.Name, err)
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

	before := b.DeepCopy()
	b.Status.Builder = &v1alpha1.MachineOSBuilderReference{
		ImageBuilderType: v1alpha1.JobBuilder,
		Job:              &v1alpha1.ObjectReference{Group: batchv1.GroupName, Resource: "jobs", Namespace: jb.Namespace, Name: jb.Name},
	}
	if st.StartTime != nil && b.Status.BuildStart == nil {
		b.Status.BuildStart = st.StartTime
	}
	switch st.Phase {
	case job.PhaseSucceeded:
		return r.finish(ctx, s, stateSucceeded, nil, repository(b.Spec.RenderedImagePushSpec)+"@"+st.Digest)
	case job.PhaseFailed:
		return r.finish(ctx, s, stateFailed, st.Failure, "")
	case job.PhaseRunning:
		setBuildConditions(b, stateBuilding, "Job "+jb.Name+" is building")
	default:
		setBuildConditions(b, statePrepared, "Job "+jb.Name+" is waiting for its pod")
	}
	if isTrue(b, v1alpha1.BuildBuilding) && !isTrue(before, v1alpha1.BuildBuilding) {
		r.Recorder.Eventf(b, jb, corev1.EventTypeNormal, v1alpha1.BuildBuilding, "Build", "Building in Job %s/%s", jb.Namespace, jb.Name)
	}
	return status.Patch(ctx, r.Client, before, b)
}

// finish moves the build to a terminal state, with an event and metrics.
func (r *Reconciler) finish(ctx context.Context, s *scope, state buildState, failure *v1alpha1.BuildFailure, image string) error {
	b := s.build
	before := b.DeepCopy()
	now := metav1.Now()
	b.Status.BuildEnd = &now
	var msg string
	switch state {
	case stateSucceeded:
		b.Status.DigestedImagePushSpec = image
		msg = "Pushed " + image
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, v1alpha1.BuildSucceeded, "Build", "%s", msg)
	case stateFailed:
		b.Status.Failure = failure
		msg = failureMessage(failure)
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, v1alpha1.BuildFailed, "Build", "%s", status.Truncate(msg, 1024))
	}
	setBuildConditions(b, state, msg)
	observe(b, state)
	return status.Patch(ctx, r.Client, before, b)
}

// failureMessage is the one-line account of a failure used in conditions.
func failureMessage(f *v1alpha1.BuildFailure) string {
	if f == nil {
		return "the build failed without saying why"
	}
	msg := fmt.Sprintf("%s failed: %s", f.Step, f.Message)
	if tail := strings.TrimSpace(f.LogTail); tail != "" {
		lines := strings.Split(tail, "\n")
		msg += "\nLast lines of the build log:\n" + strings.Join(lines[max(0, len(lines)-10):], "\n")
	}
	return msg
}

func observe(b *v1alpha1.MachineOSBuild, state buildState) {
	result := string(state)
	buildsTotal.WithLabelValues(result).Inc()
	if b.Status.BuildStart != nil && b.Status.BuildEnd != nil {
		buildDuration.WithLabelValues(result).Observe(b.Status.BuildEnd.Sub(b.Status.BuildStart.Time).Seconds())
	}
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
	observe(b, stateInterrupted)
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, v1alpha1.BuildInterrupted, "Interrupt", "%s", msg)
	return status.Patch(ctx, r.Client, before, b)
}

// deleteJob deletes a build's Job (with its pods) and Secret.
func (r *Reconciler) deleteJob(ctx context.Context, b *v1alpha1.MachineOSBuild) error {
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
// with their images; never the current build, nor one whose image the
// MachineOSConfig or any node names as current or desired.
func (r *Reconciler) collectGarbage(ctx context.Context, s *scope) error {
	builds, err := r.buildsOf(ctx, s.mosc.Name)
	if err != nil {
		return err
	}
	inUse, err := history.NamedByNodes(ctx, r.Client,
		[]string{v1alpha1.CurrentImageAnnotation, v1alpha1.DesiredImageAnnotation}, s.mosc.Status.CurrentImagePullSpec)
	if err != nil {
		return err
	}
	var old []v1alpha1.MachineOSBuild
	for _, b := range builds {
		used := b.Status.DigestedImagePushSpec != "" && inUse[b.Status.DigestedImagePushSpec]
		if b.Name != s.build.Name && terminal(&b) && !used {
			old = append(old, b)
		}
	}
	if len(old) <= r.Config.History {
		return nil
	}
	slices.SortFunc(old, func(a, b v1alpha1.MachineOSBuild) int { return history.NewestFirst(&a, &b) })
	for i := r.Config.History; i < len(old); i++ {
		b := &old[i]
		if image := b.Status.DigestedImagePushSpec; image != "" {
			if err := r.Registry.Delete(ctx, image, s.pushKC); err != nil {
				// The build goes anyway; a registry that refuses deletes
				// keeps the image, which is safe.
				r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "ImageNotDeleted", "GarbageCollect", "Could not delete %s: %v", image, err)
			}
		}
		if err := r.deleteBuild(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// repository strips the tag of registry/repository:tag.
func repository(spec string) string {
	if i := strings.LastIndex(spec, ":"); i > strings.LastIndex(spec, "/") {
		return spec[:i]
	}
	return spec
}
