package job

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func TestInterpret(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	digest := "sha256:" + strings.Repeat("ab", 32)
	job := func(conds ...batchv1.JobCondition) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "build-worker-1"},
			Spec:       batchv1.JobSpec{BackoffLimit: ptr.To(int32(1)), ActiveDeadlineSeconds: ptr.To(int64(3600))},
			Status:     batchv1.JobStatus{StartTime: &start, Conditions: conds, Failed: int32(len(conds))},
		}
	}
	cond := func(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: "Job has reached the specified backoff limit"}
	}
	at := func(minutes int) metav1.Time { return metav1.NewTime(start.Add(time.Duration(minutes) * time.Minute)) }
	// podIn is a build pod in phase. A failed one failed in container in
	// with msg and exit code 3, after the containers before it succeeded;
	// a succeeded one's push container reported msg; a running one is
	// pushing.
	podIn := func(name string, phase corev1.PodPhase, finished int, in, msg string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
		add := func(c string, st corev1.ContainerState) {
			cs := corev1.ContainerStatus{Name: c, State: st}
			if c == ContainerPush {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
			} else {
				p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, cs)
			}
		}
		ok := func(c, msg string) {
			add(c, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: msg, FinishedAt: at(finished)}})
		}
		switch phase {
		case corev1.PodSucceeded:
			ok(ContainerPull, "")
			ok(ContainerBuild, "")
			ok(ContainerPush, msg)
		case corev1.PodFailed:
			for _, c := range []string{ContainerPull, ContainerBuild, ContainerPush} {
				if c == in {
					add(c, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: msg, FinishedAt: at(finished)}})
					break
				}
				ok(c, "")
			}
		case corev1.PodRunning:
			ok(ContainerPull, "")
			ok(ContainerBuild, "")
			add(ContainerPush, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}})
		}
		return p
	}
	pod := func(name string, phase corev1.PodPhase, finished int, msg string) corev1.Pod {
		return podIn(name, phase, finished, ContainerBuild, msg)
	}
	// initRunning is a Pending pod whose init container c runs.
	initRunning := func(c string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		if c == ContainerBuild {
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: ContainerPull,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}})
		}
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: c,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}})
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerPush,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
		return p
	}
	buildFail := `{"step":"Build","message":"Containerfile line 7: RUN false: exit status 1","logTail":"STEP 4/9: RUN false\nError: building at STEP \"RUN false\": exit status 1"}`
	pushFail := `{"step":"Push","message":"pushing to r/x:y: connection refused","logTail":"..."}`
	authFail := `{"step":"Auth","message":"pushing to r/x:y: the registry refused the push credentials: unauthorized","logTail":"x"}`
	pullFail := `{"step":"Auth","message":"Containerfile line 2: FROM r/base@sha256:aa: the registry refused the base image pull credentials: unauthorized","logTail":"y"}`

	cases := []struct {
		name      string
		job       *batchv1.Job
		pods      []corev1.Pod
		phase     Phase
		digest    string
		step      v1alpha1.BuildStep
		message   []string // substrings of the failure message
		logTail   string
		noStarted bool
	}{
		{name: "no job", phase: PhasePending, noStarted: true},
		{name: "no pods yet", job: job(), phase: PhasePending},
		{name: "pod pending", job: job(), pods: []corev1.Pod{pod("p1", corev1.PodPending, 0, "")}, phase: PhasePending},
		{name: "pod running", job: job(), pods: []corev1.Pod{pod("p1", corev1.PodRunning, 0, "")}, phase: PhaseRunning},
		{name: "pod pending while it pulls", job: job(), pods: []corev1.Pod{initRunning(ContainerPull)}, phase: PhaseRunning},
		{name: "pod pending while it builds", job: job(), pods: []corev1.Pod{initRunning(ContainerBuild)}, phase: PhaseRunning},
		{name: "retrying after a failed pod", job: job(),
			pods: []corev1.Pod{podIn("p1", corev1.PodFailed, 1, ContainerPush, pushFail), pod("p2", corev1.PodPending, 0, "")}, phase: PhaseRunning},
		{name: "succeeded with digest", job: job(cond(batchv1.JobComplete, "")),
			pods: []corev1.Pod{pod("p1", corev1.PodSucceeded, 1, `{"digest":"`+digest+`"}`)}, phase: PhaseSucceeded, digest: digest},
		{name: "pod succeeded before the job is complete", job: job(),
			pods: []corev1.Pod{pod("p1", corev1.PodSucceeded, 1, `{"digest":"`+digest+`"}`)}, phase: PhaseSucceeded, digest: digest},
		{name: "succeeded after a failed try", job: job(cond(batchv1.JobComplete, "")),
			pods:  []corev1.Pod{podIn("p1", corev1.PodFailed, 1, ContainerPush, pushFail), pod("p2", corev1.PodSucceeded, 2, `{"digest":"`+digest+`"}`)},
			phase: PhaseSucceeded, digest: digest},
		{name: "succeeded without digest", job: job(cond(batchv1.JobComplete, "")),
			pods:  []corev1.Pod{pod("p1", corev1.PodSucceeded, 1, "")},
			phase: PhaseFailed, step: v1alpha1.BuildStepUnknown, message: []string{"p1", "did not report", "digest"}},
		{name: "succeeded with a bad digest", job: job(cond(batchv1.JobComplete, "")),
			pods:  []corev1.Pod{pod("p1", corev1.PodSucceeded, 1, `{"digest":"sha256:abc"}`)},
			phase: PhaseFailed, step: v1alpha1.BuildStepUnknown, message: []string{"digest"}},
		{name: "complete without pods", job: job(cond(batchv1.JobComplete, "")),
			phase: PhaseFailed, step: v1alpha1.BuildStepUnknown, message: []string{"completed", "no succeeded build pod"}},
		{name: "backoff exceeded: newest pod's report", job: job(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			pods:  []corev1.Pod{pod("p2", corev1.PodFailed, 5, buildFail), podIn("p1", corev1.PodFailed, 1, ContainerPush, pushFail)},
			phase: PhaseFailed, step: v1alpha1.BuildStepBuild,
			message: []string{"Containerfile line 7: RUN false: exit status 1", "retry limit of 1"},
			logTail: "STEP 4/9: RUN false\nError: building at STEP \"RUN false\": exit status 1"},
		{name: "failed at once by the pod failure policy", job: job(cond(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy)),
			pods:  []corev1.Pod{podIn("p1", corev1.PodFailed, 1, ContainerPush, authFail)},
			phase: PhaseFailed, step: v1alpha1.BuildStepAuth, message: []string{"refused the push credentials"}, logTail: "x"},
		{name: "failure target before the failed condition", job: job(cond(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy)),
			pods:  []corev1.Pod{podIn("p1", corev1.PodFailed, 1, ContainerPush, authFail)},
			phase: PhaseFailed, step: v1alpha1.BuildStepAuth},
		{name: "pull init container failed", job: job(cond(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy)),
			pods:  []corev1.Pod{podIn("p1", corev1.PodFailed, 1, ContainerPull, pullFail)},
			phase: PhaseFailed, step: v1alpha1.BuildStepAuth, message: []string{"line 2: FROM r/base@sha256:aa", "pull credentials"}, logTail: "y"},
		{name: "deadline exceeded without a pod", job: job(cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)),
			phase: PhaseFailed, step: v1alpha1.BuildStepUnknown, message: []string{"deadline of 3600 seconds"}},
		{name: "deadline exceeded, pod killed with log fallback", job: job(cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)),
			pods:  []corev1.Pod{pod("p1", corev1.PodFailed, 60, "STEP 3/9: RUN sleep 9999\n")},
			phase: PhaseFailed, step: v1alpha1.BuildStepUnknown, message: []string{"deadline of 3600 seconds", "build container", "exit code 3"},
			logTail: "STEP 3/9: RUN sleep 9999\n"},
		{name: "not our JSON", job: job(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			pods:  []corev1.Pod{pod("p1", corev1.PodFailed, 1, "panic: something\ngoroutine 1")},
			phase: PhaseFailed, step: v1alpha1.BuildStepUnknown, message: []string{"without saying what failed"},
			logTail: "panic: something\ngoroutine 1"},
		{name: "JSON with an unknown step", job: job(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			pods:  []corev1.Pod{pod("p1", corev1.PodFailed, 1, `{"step":"Bogus","message":"m"}`)},
			phase: PhaseFailed, step: v1alpha1.BuildStepUnknown, logTail: `{"step":"Bogus","message":"m"}`},
		{name: "failed pod without container status", job: job(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			pods:  []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on disk"}}},
			phase: PhaseFailed, step: v1alpha1.BuildStepUnknown, message: []string{"Evicted", "low on disk"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := Interpret(c.job, c.pods)
			if st.Phase != c.phase || st.Digest != c.digest {
				t.Fatalf("phase %s digest %q, want %s %q (failure %+v)", st.Phase, st.Digest, c.phase, c.digest, st.Failure)
			}
			if c.noStarted != (st.StartTime == nil) {
				t.Errorf("start time %v", st.StartTime)
			}
			if c.phase != PhaseFailed {
				if st.Failure != nil {
					t.Errorf("failure %+v on a build that did not fail", st.Failure)
				}
				return
			}
			f := st.Failure
			if f == nil {
				t.Fatal("no failure")
			}
			if f.Step != c.step {
				t.Errorf("step %s, want %s (%q)", f.Step, c.step, f.Message)
			}
			for _, m := range c.message {
				if !strings.Contains(f.Message, m) {
					t.Errorf("message %q lacks %q", f.Message, m)
				}
			}
			if f.Message == "" || len(f.Message) > 4096 {
				t.Errorf("message of %d bytes", len(f.Message))
			}
			if c.logTail != "" && f.LogTail != c.logTail {
				t.Errorf("log tail %q, want %q", f.LogTail, c.logTail)
			}
		})
	}
}

func TestInterpretBoundsFailure(t *testing.T) {
	j := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{
		Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy}}}}
	long := strings.Repeat("é", 20000)
	p := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{
		Name: ContainerBuild, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: long}},
	}}}}
	f := Interpret(j, []corev1.Pod{p}).Failure
	if f == nil || len(f.LogTail) > 16384 || len(f.Message) > 4096 {
		t.Fatalf("failure not bounded: %d/%d bytes", len(f.Message), len(f.LogTail))
	}
	if tail, ok := strings.CutPrefix(f.LogTail, cutMarker); !ok || !strings.HasSuffix(long, tail) {
		t.Error("log tail is not the marker and the end of the log, whole characters")
	}
}

// BoundFailure cuts what a builder or a registry said to the API's limits,
// at character boundaries, with a marker where it cut; what fits is left
// as it is, and bytes that are not UTF-8 are replaced.
func TestBoundFailure(t *testing.T) {
	cases := []struct {
		name                string
		in                  v1alpha1.BuildFailure
		message, logTail    string // the whole, when not cut
		messageCut, tailCut bool
	}{
		{name: "fits", in: v1alpha1.BuildFailure{Message: "RUN false: exit status 1", LogTail: "a\nb"},
			message: "RUN false: exit status 1", logTail: "a\nb"},
		{name: "empty message", in: v1alpha1.BuildFailure{}, message: "the build failed without saying why"},
		{name: "exactly at the limits", in: v1alpha1.BuildFailure{Message: strings.Repeat("m", v1alpha1.MaxBuildFailureMessage), LogTail: strings.Repeat("l", v1alpha1.MaxBuildFailureLogTail)},
			message: strings.Repeat("m", v1alpha1.MaxBuildFailureMessage), logTail: strings.Repeat("l", v1alpha1.MaxBuildFailureLogTail)},
		{name: "two-byte characters over", in: v1alpha1.BuildFailure{Message: strings.Repeat("é", 5000), LogTail: strings.Repeat("é", 9000)}, messageCut: true, tailCut: true},
		{name: "four-byte characters over", in: v1alpha1.BuildFailure{Message: "x" + strings.Repeat("😀", 2000), LogTail: "x" + strings.Repeat("😀", 5000)}, messageCut: true, tailCut: true},
		{name: "invalid bytes", in: v1alpha1.BuildFailure{Message: "bad \xff byte", LogTail: "\xfe"}, message: "bad \uFFFD byte", logTail: "\uFFFD"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			f := BoundFailure(&in)
			for _, v := range []struct {
				what, got, whole, original string
				limit                      int
				cut                        bool
			}{
				{"message", f.Message, c.message, c.in.Message, v1alpha1.MaxBuildFailureMessage, c.messageCut},
				{"log tail", f.LogTail, c.logTail, c.in.LogTail, v1alpha1.MaxBuildFailureLogTail, c.tailCut},
			} {
				if len(v.got) > v.limit || !utf8.ValidString(v.got) {
					t.Errorf("%s of %d bytes (valid UTF-8: %v), limit %d", v.what, len(v.got), utf8.ValidString(v.got), v.limit)
				}
				switch {
				case !v.cut && v.got != v.whole:
					t.Errorf("%s %q, want %q", v.what, v.got, v.whole)
				case v.cut && v.what == "message" && (!strings.HasSuffix(v.got, "...") || !strings.HasPrefix(v.original, strings.TrimSuffix(v.got, "..."))):
					t.Errorf("message not cut to its start and a marker: ...%q", v.got[max(0, len(v.got)-20):])
				case v.cut && v.what == "log tail" && (!strings.HasPrefix(v.got, cutMarker) || !strings.HasSuffix(v.original, strings.TrimPrefix(v.got, cutMarker))):
					t.Errorf("log tail not cut to a marker and its end: %q...", v.got[:min(len(v.got), 20)])
				case v.cut && len(v.got) < v.limit-4:
					t.Errorf("%s cut to %d bytes, more than a character short of %d", v.what, len(v.got), v.limit)
				}
			}
		})
	}
}

// A build pod that cannot start fails the build with the kubelet's or the
// scheduler's reason, within a minute, and asks for its Job to go.
func TestInterpretPodThatCannotStart(t *testing.T) {
	now := metav1.Now()
	jb := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "build-worker-1"}, Status: batchv1.JobStatus{StartTime: &now, Active: 1}}
	pending := func(st corev1.PodStatus) []corev1.Pod {
		st.Phase = corev1.PodPending
		return []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "build-worker-1-x"}, Status: st}}
	}
	unschedulable := func(since time.Duration) []corev1.Pod {
		return pending(corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message:            "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
			LastTransitionTime: metav1.NewTime(time.Now().Add(-since)),
		}}})
	}

	st := Interpret(jb, pending(corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{
		Name: ContainerPull, Image: "registry.example.com/strata/builder:gone",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.example.com/strata/builder:gone"`}},
	}}}))
	if st.Phase != PhaseFailed || !st.StopJob || st.Failure == nil || st.Failure.Step != v1alpha1.BuildStepPrepare ||
		!strings.Contains(st.Failure.Message, "ImagePullBackOff") || !strings.Contains(st.Failure.Message, "builder:gone") {
		t.Errorf("image pull failure: %+v (failure %+v), want Failed with the kubelet's reason and the image", st, st.Failure)
	}

	// A pod the runtime cannot make a sandbox for (hostUsers: false on a
	// runtime without user namespaces) waits, then fails.
	noSandbox := func(since time.Duration) []corev1.Pod {
		return pending(corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, Reason: "PodSandboxNotReady",
				Message: "no pod sandbox exists", LastTransitionTime: metav1.NewTime(time.Now().Add(-since))},
		}})
	}
	st = Interpret(jb, noSandbox(10*time.Second))
	if st.Phase != PhasePending || st.RetryAfter <= 0 || st.RetryAfter > StartGrace-9*time.Second {
		t.Errorf("no sandbox for 10s: %+v, want Pending and a look again within %s", st, StartGrace-10*time.Second)
	}
	st = Interpret(jb, noSandbox(StartGrace+time.Second))
	if st.Phase != PhaseFailed || !st.StopJob || st.Failure == nil || st.Failure.Step != v1alpha1.BuildStepPrepare ||
		!strings.Contains(st.Failure.Message, "sandbox") || !strings.Contains(st.Failure.Message, "hostUsers") {
		t.Errorf("no sandbox past the grace: %+v (failure %+v), want Failed saying the runtime made no sandbox", st, st.Failure)
	}

	st = Interpret(jb, unschedulable(10*time.Second))
	if st.Phase != PhasePending || st.RetryAfter <= 0 || st.RetryAfter > StartGrace-9*time.Second {
		t.Errorf("unschedulable for 10s: %+v, want Pending and a look again within %s", st, StartGrace-10*time.Second)
	}
	st = Interpret(jb, unschedulable(StartGrace+time.Second))
	if st.Phase != PhaseFailed || !st.StopJob || st.Failure == nil || !strings.Contains(st.Failure.Message, "didn't match Pod's node affinity") {
		t.Errorf("unschedulable past the grace: %+v (failure %+v), want Failed with the scheduler's message", st, st.Failure)
	}
}
