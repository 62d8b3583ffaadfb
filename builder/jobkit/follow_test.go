package jobkit_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/diskjob"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/builder/jobkit"
)

var start = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

// ended is a pod in phase whose one container ended with exit and msg,
// minutes after start.
func ended(name string, phase corev1.PodPhase, exit int32, msg string, minutes int) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "work", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exit, Message: msg, FinishedAt: metav1.NewTime(start.Add(time.Duration(minutes) * time.Minute))}},
		}}},
	}
}

func failedJob(reason string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "kind-x"},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr.To(int32(1)), ActiveDeadlineSeconds: ptr.To(int64(60))},
		Status: batchv1.JobStatus{StartTime: &start, Failed: 2, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason},
		}},
	}
}

// TestFollow follows a Job of a made-up kind, whose "work" container
// reports "done" on success, through what Follow reads the same way for
// every kind.
func TestFollow(t *testing.T) {
	var read []string
	kind := jobkit.Success{
		Container: "work",
		Read: func(pod *corev1.Pod, msg string) *v1alpha1.BuildFailure {
			read = append(read, pod.Name)
			if msg == "done" {
				return nil
			}
			return &v1alpha1.BuildFailure{Step: v1alpha1.BuildStepUnknown, Message: "pod " + pod.Name + " said " + msg, LogTail: strings.Repeat("x", 20000)}
		},
		Missing: "no pod said done",
	}
	running := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "kind-x"}, Status: batchv1.JobStatus{StartTime: &start}}
	complete := running.DeepCopy()
	complete.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	pending := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	cases := []struct {
		name     string
		job      *batchv1.Job
		pods     []corev1.Pod
		phase    jobkit.Phase
		read     []string // the pods Read was given
		step     v1alpha1.BuildStep
		message  string
		logTail  string
		stopJob  bool
		noStart  bool
		boundLog bool
	}{
		{name: "no Job", pods: []corev1.Pod{ended("p", corev1.PodSucceeded, 0, "done", 1)}, phase: jobkit.PhasePending, noStart: true},
		{name: "no pod yet", job: running, phase: jobkit.PhasePending},
		{name: "pending pod", job: running, pods: []corev1.Pod{pending}, phase: jobkit.PhasePending},
		{name: "running pod", job: running, pods: []corev1.Pod{ended("p", corev1.PodRunning, 0, "", 0)}, phase: jobkit.PhaseRunning},
		{name: "succeeded before the Job completes", job: running, pods: []corev1.Pod{ended("p", corev1.PodSucceeded, 0, "done", 1)},
			phase: jobkit.PhaseSucceeded, read: []string{"p"}},
		{name: "the newest succeeded pod is read", job: complete,
			pods:  []corev1.Pod{ended("new", corev1.PodSucceeded, 0, "done", 2), ended("old", corev1.PodSucceeded, 0, "garbage", 1)},
			phase: jobkit.PhaseSucceeded, read: []string{"new"}},
		{name: "succeeded without the report", job: running, pods: []corev1.Pod{ended("p", corev1.PodSucceeded, 0, "garbage", 1)},
			phase: jobkit.PhaseFailed, read: []string{"p"}, step: v1alpha1.BuildStepUnknown, message: "pod p said garbage", boundLog: true},
		{name: "complete without a succeeded pod", job: complete,
			phase: jobkit.PhaseFailed, step: v1alpha1.BuildStepUnknown, message: "Job kind-x completed but no pod said done"},
		{name: "failed for good, the pod says why", job: failedJob(batchv1.JobReasonPodFailurePolicy),
			pods:  []corev1.Pod{ended("p", corev1.PodFailed, jobkit.ExitCodePermanent, `{"step":"Disk","message":"too small","logTail":"t"}`, 1)},
			phase: jobkit.PhaseFailed, step: v1alpha1.BuildStepDisk, message: "too small", logTail: "t"},
		{name: "the newest failed pod says why", job: failedJob(batchv1.JobReasonBackoffLimitExceeded),
			pods: []corev1.Pod{
				ended("old", corev1.PodFailed, 1, `{"step":"Push","message":"first"}`, 1),
				ended("new", corev1.PodFailed, 1, `{"step":"Push","message":"second"}`, 2),
			},
			phase: jobkit.PhaseFailed, step: v1alpha1.BuildStepPush, message: "second (the build failed 2 time(s), more than its retry limit of 1)"},
		{name: "deadline, the pod killed", job: failedJob(batchv1.JobReasonDeadlineExceeded),
			pods:  []corev1.Pod{ended("p", corev1.PodFailed, 137, "the log's tail", 1)},
			phase: jobkit.PhaseFailed, step: v1alpha1.BuildStepUnknown, message: "deadline of 60 seconds", logTail: "the log's tail"},
		{name: "an image that cannot be pulled", job: running, pods: []corev1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "work", Image: "img:gone",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}},
		}}, phase: jobkit.PhaseFailed, step: v1alpha1.BuildStepPrepare, message: "img:gone", stopJob: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			read = nil
			st := jobkit.Follow(c.job, c.pods, kind)
			if st.Phase != c.phase || st.StopJob != c.stopJob || (st.StartTime == nil) != c.noStart {
				t.Fatalf("status %+v (failure %+v), want phase %s, stop %v", st, st.Failure, c.phase, c.stopJob)
			}
			if !reflect.DeepEqual(read, c.read) {
				t.Errorf("read pods %v, want %v", read, c.read)
			}
			f := st.Failure
			if c.step == "" {
				if f != nil {
					t.Errorf("failure %+v", f)
				}
				return
			}
			if f == nil || f.Step != c.step || !strings.Contains(f.Message, c.message) {
				t.Fatalf("failure %+v, want step %s saying %q", f, c.step, c.message)
			}
			if c.logTail != "" && f.LogTail != c.logTail {
				t.Errorf("log tail %q, want %q", f.LogTail, c.logTail)
			}
			if c.boundLog && (len(f.LogTail) > v1alpha1.MaxBuildFailureLogTail || !strings.HasPrefix(f.LogTail, jobkit.CutMarker)) {
				t.Errorf("log tail of %d bytes, not bounded and marked", len(f.LogTail))
			}
		})
	}
}

// TestFailureReports: the build script's report and strata-bootdisk's
// carry a failure in the same fields, which Follow reads the same way for
// both Jobs.
func TestFailureReports(t *testing.T) {
	want := v1alpha1.BuildFailure{Step: v1alpha1.BuildStepAuth, Message: "the registry refused the push credentials", LogTail: "401 Unauthorized\n"}
	for name, report := range map[string]any{
		"job.TerminationMessage": job.TerminationMessage{Step: want.Step, Message: want.Message, LogTail: want.LogTail},
		"diskjob.Report":         diskjob.Report{Step: want.Step, Message: want.Message, LogTail: want.LogTail},
	} {
		raw, err := json.Marshal(report)
		if err != nil {
			t.Fatal(err)
		}
		st := jobkit.Follow(failedJob(batchv1.JobReasonPodFailurePolicy),
			[]corev1.Pod{ended("p", corev1.PodFailed, jobkit.ExitCodePermanent, string(raw), 1)},
			jobkit.Success{Container: "work", Read: func(*corev1.Pod, string) *v1alpha1.BuildFailure { return nil }})
		if st.Phase != jobkit.PhaseFailed || st.Failure == nil || !reflect.DeepEqual(*st.Failure, want) {
			t.Errorf("%s %s: status %+v, failure %+v, want %+v", name, raw, st, st.Failure, want)
		}
	}
}

// A pod the scheduler cannot place fails its Job once StartGrace has
// passed, and until then says when to look again.
func TestFollowUnschedulable(t *testing.T) {
	jb := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "kind-x"}, Status: batchv1.JobStatus{StartTime: &start}}
	unschedulable := func(since time.Duration) []corev1.Pod {
		return []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/1 nodes are available", LastTransitionTime: metav1.NewTime(time.Now().Add(-since)),
		}}}}}
	}
	kind := jobkit.Success{Container: "work", Read: func(*corev1.Pod, string) *v1alpha1.BuildFailure { return nil }}
	if st := jobkit.Follow(jb, unschedulable(10*time.Second), kind); st.Phase != jobkit.PhasePending || st.RetryAfter <= 0 || st.RetryAfter > jobkit.StartGrace-9*time.Second {
		t.Errorf("unschedulable for 10s: %+v, want Pending and a look again within %s", st, jobkit.StartGrace-10*time.Second)
	}
	if st := jobkit.Follow(jb, unschedulable(jobkit.StartGrace+time.Second), kind); st.Phase != jobkit.PhaseFailed || !st.StopJob ||
		st.Failure == nil || !strings.Contains(st.Failure.Message, "0/1 nodes are available") {
		t.Errorf("unschedulable past the grace: %+v (failure %+v), want Failed with the scheduler's message", st, st.Failure)
	}
}
