package job

import (
	"encoding/json"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/jobkit"
	"github.com/strata-dev/strata/internal/imageref"
)

// Phase is where a build stands.
type Phase = jobkit.Phase

// Phases of a build.
const (
	PhasePending   = jobkit.PhasePending
	PhaseRunning   = jobkit.PhaseRunning
	PhaseSucceeded = jobkit.PhaseSucceeded
	PhaseFailed    = jobkit.PhaseFailed
)

// Status is a build's state as its Job and pods show it: its Digest is
// the pushed image's, when Succeeded.
type Status = jobkit.Status

// StartGrace is how long a build pod may stay unschedulable before the
// build fails with the scheduler's reason (jobkit.StartGrace).
const StartGrace = jobkit.StartGrace

// TerminationMessage is what the build script writes to a container's
// termination message: the push container's Digest on success; the failed
// container's Step, Message and LogTail on failure.
type TerminationMessage struct {
	Digest  string             `json:"digest,omitempty"`
	Step    v1alpha1.BuildStep `json:"step,omitempty"`
	Message string             `json:"message,omitempty"`
	LogTail string             `json:"logTail,omitempty"`
}

// Interpret derives a build's status from its Job and the Job's pods
// (those with PodLabels), as jobkit.Follow reads every Job of the
// builder: a succeeded pod is a pushed image when its push container
// reports a digest. A nil Job is Pending.
func Interpret(job *batchv1.Job, pods []corev1.Pod) Status {
	var digest string
	st := jobkit.Follow(job, pods, jobkit.Success{
		Container: ContainerPush,
		Read: func(pod *corev1.Pod, msg string) *v1alpha1.BuildFailure {
			var tm TerminationMessage
			if json.Unmarshal([]byte(msg), &tm) == nil && imageref.ValidDigest(tm.Digest) {
				digest = tm.Digest
				return nil
			}
			return &v1alpha1.BuildFailure{
				Step:    v1alpha1.BuildStepUnknown,
				Message: fmt.Sprintf("build pod %s succeeded but did not report the pushed image's digest in its termination message", pod.Name),
				LogTail: tailOf(msg, tm),
			}
		},
		Missing: "no succeeded build pod reports the pushed image's digest",
	})
	st.Digest = digest
	return st
}

// BoundFailure keeps a failure within the API's limits, so that the
// status write that reports it is never refused for its length
// (jobkit.BoundFailure).
func BoundFailure(f *v1alpha1.BuildFailure) *v1alpha1.BuildFailure {
	return jobkit.BoundFailure(f)
}

func tailOf(msg string, tm TerminationMessage) string {
	if tm.LogTail != "" {
		return tm.LogTail
	}
	if tm.Digest == "" && tm.Step == "" {
		return msg
	}
	return ""
}
