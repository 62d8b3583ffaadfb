package jobkit

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/status"
)

// Phase is where a Job's work stands.
type Phase string

// Phases of a Job's work.
const (
	PhasePending   Phase = "Pending"
	PhaseRunning   Phase = "Running"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
)

// Status is a Job's state as it and its pods show it.
type Status struct {
	Phase Phase
	// Digest is "sha256:<64 hex>" of the image a build pod pushed, when
	// Succeeded (builder/job); the boot disk Job's report is its own
	// (builder/diskjob's Status).
	Digest string
	// Failure says what failed, when Failed.
	Failure *v1alpha1.BuildFailure
	// StartTime is when the Job started.
	StartTime *metav1.Time
	// StopJob is set on a Job failed because its pod cannot start: the
	// Job would go on waiting, and must be deleted.
	StopJob bool
	// RetryAfter, when not zero, is when to look again: a pod waiting to
	// be scheduled fails the Job once StartGrace has passed, and no event
	// may come to say so.
	RetryAfter time.Duration
}

// StartGrace is how long a pod may stay unschedulable before its Job
// fails with the scheduler's reason. The scheduler may yet find room (a
// pod ends, a node joins), but a Job waiting longer says why instead of
// waiting out its deadline.
const StartGrace = time.Minute

// Success is how a Job's pod says it did its work.
type Success struct {
	// Container is the container whose termination message says it.
	Container string
	// Read reads that message (msg, "" when there is none) of the
	// succeeded pod: nil when it reports the work done, having kept what
	// it reports, else the failure; Follow bounds it.
	Read func(pod *corev1.Pod, msg string) *v1alpha1.BuildFailure
	// Missing ends the message of a Job that completed with no succeeded
	// pod to read ("no succeeded pod reports the published artifact").
	Missing string
}

// pullFailures are the kubelet's reasons for a container it cannot start
// because of its image or its definition; they do not heal by themselves.
var pullFailures = map[string]bool{
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
}

// failureReport is what a failed container writes to its termination
// message, one JSON object, which the build script's job.TerminationMessage
// and strata-bootdisk's diskjob.Report both carry (TestFailureReports).
type failureReport struct {
	Step    v1alpha1.BuildStep `json:"step,omitempty"`
	Message string             `json:"message,omitempty"`
	LogTail string             `json:"logTail,omitempty"`
}

// Follow derives a Job's status from the Job and its pods (those its
// labels select), reading a succeeded pod's report with s. A nil Job is
// Pending.
func Follow(job *batchv1.Job, pods []corev1.Pod, s Success) Status {
	if job == nil {
		return Status{Phase: PhasePending}
	}
	st := Status{StartTime: job.Status.StartTime}

	// A pod that succeeded and reported its work is the Job's success,
	// even before the Job controller marks the Job complete.
	if pod := newest(pods, corev1.PodSucceeded); pod != nil {
		if f := s.Read(pod, termination(pod, s.Container)); f != nil {
			st.Phase, st.Failure = PhaseFailed, BoundFailure(f)
			return st
		}
		st.Phase = PhaseSucceeded
		return st
	}

	if c := jobCondition(job, batchv1.JobComplete); c != nil {
		st.Phase = PhaseFailed
		st.Failure = &v1alpha1.BuildFailure{
			Step:    v1alpha1.BuildStepUnknown,
			Message: fmt.Sprintf("Job %s completed but %s", job.Name, s.Missing),
		}
		return st
	}

	failedCond := jobCondition(job, batchv1.JobFailed)
	if failedCond == nil {
		failedCond = jobCondition(job, batchv1.JobFailureTarget)
	}
	if failedCond != nil {
		st.Phase = PhaseFailed
		st.Failure = jobFailure(job, failedCond, newest(pods, corev1.PodFailed))
		return st
	}

	st.Phase = PhasePending
	for i := range pods {
		if started(&pods[i]) {
			st.Phase = PhaseRunning
		}
	}
	for i := range pods {
		failure, retry := startFailure(&pods[i], time.Now())
		if failure != nil {
			st.Phase, st.Failure, st.StopJob, st.RetryAfter = PhaseFailed, BoundFailure(failure), true, 0
			return st
		}
		if retry > 0 && (st.RetryAfter == 0 || retry < st.RetryAfter) {
			st.RetryAfter = retry
		}
	}
	return st
}

// startFailure says why a pending pod cannot start, in the kubelet's or
// the scheduler's words: an image that cannot be pulled (the builder
// image, usually) at once; a pod the scheduler cannot place, or one the
// runtime makes no sandbox for, once it has waited StartGrace. Otherwise
// it returns how long until that grace ends, or zero.
func startFailure(pod *corev1.Pod, now time.Time) (*v1alpha1.BuildFailure, time.Duration) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodPending {
		return nil, 0
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && pullFailures[w.Reason] {
			return &v1alpha1.BuildFailure{Step: v1alpha1.BuildStepPrepare, Message: fmt.Sprintf(
				"build pod %s cannot start its %s container (image %s): %s: %s", pod.Name, cs.Name, cs.Image, w.Reason, w.Message)}, 0
		}
	}
	for _, c := range pod.Status.Conditions {
		var why string
		switch {
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable:
			why = "cannot be scheduled"
		case c.Type == corev1.PodReadyToStartContainers && c.Status == corev1.ConditionFalse:
			// The runtime makes a sandbox in seconds, or never: a
			// runtime without user namespace support refuses one for
			// hostUsers: false, and says so only in an Event.
			why = "has no sandbox: the node's runtime could not make one (its Events say why; a runtime without user namespace support refuses hostUsers: false)"
		default:
			continue
		}
		waited := now.Sub(c.LastTransitionTime.Time)
		if waited < StartGrace {
			return nil, StartGrace - waited
		}
		return &v1alpha1.BuildFailure{Step: v1alpha1.BuildStepPrepare, Message: strings.TrimSuffix(fmt.Sprintf(
			"build pod %s %s (waited %s): %s", pod.Name, why, waited.Round(time.Second), c.Message), ": ")}, 0
	}
	return nil, 0
}

// started says whether a pod's work has started: the pod stays Pending
// while its init containers run, and a failed pod that the Job retries
// still means the work has started.
func started(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodRunning, corev1.PodFailed:
		return true
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}

// jobFailure explains a failed Job by its condition and its newest failed
// pod.
func jobFailure(job *batchv1.Job, cond *batchv1.JobCondition, pod *corev1.Pod) *v1alpha1.BuildFailure {
	var why string
	switch cond.Reason {
	case batchv1.JobReasonDeadlineExceeded:
		d := int64(0)
		if job.Spec.ActiveDeadlineSeconds != nil {
			d = *job.Spec.ActiveDeadlineSeconds
		}
		why = fmt.Sprintf("the build ran longer than its deadline of %d seconds and was stopped", d)
	case batchv1.JobReasonBackoffLimitExceeded:
		n := int32(0)
		if job.Spec.BackoffLimit != nil {
			n = *job.Spec.BackoffLimit
		}
		why = fmt.Sprintf("the build failed %d time(s), more than its retry limit of %d", job.Status.Failed, n)
	case batchv1.JobReasonPodFailurePolicy:
		why = "" // the pod failed for a reason retrying cannot fix: it says which
	default:
		why = strings.TrimSpace(fmt.Sprintf("Job %s failed: %s %s", job.Name, cond.Reason, cond.Message))
	}

	f := podFailure(pod)
	if f == nil {
		if why == "" {
			why = fmt.Sprintf("Job %s failed: %s %s", job.Name, cond.Reason, cond.Message)
		}
		return BoundFailure(&v1alpha1.BuildFailure{Step: v1alpha1.BuildStepUnknown, Message: why})
	}
	if why != "" {
		if cond.Reason == batchv1.JobReasonDeadlineExceeded && f.Step == v1alpha1.BuildStepUnknown {
			f.Message = why + " (" + f.Message + ")"
		} else {
			f.Message += " (" + why + ")"
		}
	}
	return BoundFailure(f)
}

// podFailure reads the termination message of a failed pod's failed
// container, init containers included; nil without a pod.
func podFailure(pod *corev1.Pod) *v1alpha1.BuildFailure {
	if pod == nil {
		return nil
	}
	name, msg, term := failedContainer(pod)
	if term == nil {
		reason := pod.Status.Reason
		if reason == "" {
			reason = "no container failed"
		}
		return &v1alpha1.BuildFailure{
			Step:    v1alpha1.BuildStepUnknown,
			Message: fmt.Sprintf("build pod %s failed before one of its containers ended (%s) %s", pod.Name, reason, pod.Status.Message),
		}
	}
	var r failureReport
	if json.Unmarshal([]byte(msg), &r) == nil && r.Step != "" && r.Message != "" && knownStep(r.Step) {
		return &v1alpha1.BuildFailure{Step: r.Step, Message: r.Message, LogTail: r.LogTail}
	}
	// No report of ours: the kubelet put the log's tail there
	// (FallbackToLogsOnError), or nothing.
	return &v1alpha1.BuildFailure{
		Step: v1alpha1.BuildStepUnknown,
		Message: fmt.Sprintf("%s container of pod %s ended with exit code %d (%s) without saying what failed; see the log tail",
			name, pod.Name, term.ExitCode, orDefault(term.Reason, "Error")),
		LogTail: msg,
	}
}

func knownStep(s v1alpha1.BuildStep) bool {
	switch s {
	case v1alpha1.BuildStepPrepare, v1alpha1.BuildStepPullBase, v1alpha1.BuildStepAuth,
		v1alpha1.BuildStepBuild, v1alpha1.BuildStepPush, v1alpha1.BuildStepDisk, v1alpha1.BuildStepUnknown:
		return true
	}
	return false
}

// termination returns a container's termination message; "" when it has
// not terminated.
func termination(pod *corev1.Pod, container string) string {
	for _, cs := range statuses(pod) {
		if cs.Name != container {
			continue
		}
		if t := terminated(cs); t != nil {
			return t.Message
		}
	}
	return ""
}

// failedContainer returns the first container of the pod, in the order
// they run, that ended with a non-zero exit code: its name, termination
// message and state. The state is nil when none did.
func failedContainer(pod *corev1.Pod) (string, string, *corev1.ContainerStateTerminated) {
	for _, cs := range statuses(pod) {
		if t := terminated(cs); t != nil && t.ExitCode != 0 {
			return cs.Name, t.Message, t
		}
	}
	return "", "", nil
}

// statuses are a pod's container statuses in the order the containers
// run: init containers first.
func statuses(pod *corev1.Pod) []corev1.ContainerStatus {
	return slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses)
}

func terminated(cs corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if t := cs.State.Terminated; t != nil {
		return t
	}
	return cs.LastTerminationState.Terminated
}

// newest is the newest pod in phase, nil when none is.
func newest(pods []corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	var out *corev1.Pod
	for i := range pods {
		if pods[i].Status.Phase == phase && (out == nil || newer(&pods[i], out)) {
			out = &pods[i]
		}
	}
	return out
}

// newer says whether a is newer than b: by when its last container ended, then
// by creation, then by name for a stable answer.
func newer(a, b *corev1.Pod) bool {
	ta, tb := endTime(a), endTime(b)
	if !ta.Equal(&tb) {
		return tb.Before(&ta)
	}
	ca, cb := a.CreationTimestamp, b.CreationTimestamp
	if !ca.Equal(&cb) {
		return cb.Before(&ca)
	}
	return a.Name > b.Name
}

// endTime is when the pod's last container ended.
func endTime(p *corev1.Pod) metav1.Time {
	var end metav1.Time
	for _, cs := range statuses(p) {
		if t := terminated(cs); t != nil && end.Before(&t.FinishedAt) {
			end = t.FinishedAt
		}
	}
	return end
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// BoundFailure keeps a failure within the API's limits, so that the
// status write that reports it is never refused for its length: the
// message keeps its start (what failed), the log its end (what the pod
// said last); each is cut at a character boundary and marked. Bytes that
// are not UTF-8 (a log is whatever a RUN step printed) are replaced
// first, since the API stores only valid UTF-8.
func BoundFailure(f *v1alpha1.BuildFailure) *v1alpha1.BuildFailure {
	if f == nil {
		return nil
	}
	f.Message = status.Truncate(strings.ToValidUTF8(f.Message, "\uFFFD"), v1alpha1.MaxBuildFailureMessage)
	f.LogTail = keepTail(strings.ToValidUTF8(f.LogTail, "\uFFFD"), v1alpha1.MaxBuildFailureLogTail)
	if f.Message == "" {
		f.Message = "the build failed without saying why"
	}
	return f
}

// CutMarker starts a log tail whose beginning BoundFailure cut.
const CutMarker = "[...] "

// keepTail cuts s to its last n bytes at most, starting at a character
// and marked, when it is longer.
func keepTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	start := len(s) - (n - len(CutMarker))
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return CutMarker + s[start:]
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
