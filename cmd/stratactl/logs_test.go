package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// TestLogSources: the containers of a build's Job pods, in the order they
// ran, and a clear note when there is no pod. GetLogs itself needs a
// kubelet, which envtest has not: the e2e reads logs through the API.
func TestLogSources(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "strata-system"}}); err != nil {
		t.Fatal(err)
	}
	build := func(name string, job *v1alpha1.ObjectReference) *v1alpha1.MachineOSBuild {
		b := &v1alpha1.MachineOSBuild{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MachineOSBuildSpec{
				MachineConfig:         v1alpha1.LocalObjectReference{Name: "rendered-worker-1"},
				MachineOSConfig:       v1alpha1.LocalObjectReference{Name: "worker"},
				RenderedImagePushSpec: "registry.example.com/os/worker:latest",
			},
			Status: v1alpha1.MachineOSBuildStatus{Strategy: v1alpha1.ConfigLayerStrategy},
		}
		if job != nil {
			b.Status.Builder = &v1alpha1.MachineOSBuilderReference{ImageBuilderType: v1alpha1.JobBuilder, Job: job}
		}
		createWithStatus(ctx, t, env.Client, b)
		got := &v1alpha1.MachineOSBuild{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	pod := func(name, job string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: name, Labels: map[string]string{jobNameLabel: job}},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "pull", Image: "builder"}, {Name: "build", Image: "builder"}},
				Containers:     []corev1.Container{{Name: "push", Image: "builder"}},
			},
		}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "push", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		if err := env.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	pod("job-a-2", "job-a")
	pod("job-a-1", "job-a")
	pod("other", "job-b")

	t.Run("job pods", func(t *testing.T) {
		b := build("worker-a", &v1alpha1.ObjectReference{Group: "batch", Resource: "jobs", Namespace: "strata-system", Name: "job-a"})
		got, note, err := logSources(ctx, env.Client, b)
		if err != nil || note != "" {
			t.Fatalf("err %v note %q", err, note)
		}
		var names []string
		for _, s := range got {
			names = append(names, s.pod+"/"+s.container)
			if s.running != (s.container == "push") {
				t.Errorf("%s/%s running = %v", s.pod, s.container, s.running)
			}
		}
		// Created in the same second: by name.
		want := "job-a-1/pull job-a-1/build job-a-1/push job-a-2/pull job-a-2/build job-a-2/push"
		if strings.Join(names, " ") != want {
			t.Errorf("sources %q, want %q", names, want)
		}
	})
	t.Run("no pod", func(t *testing.T) {
		b := build("worker-gone", &v1alpha1.ObjectReference{Group: "batch", Resource: "jobs", Namespace: "strata-system", Name: "job-gone"})
		got, note, err := logSources(ctx, env.Client, b)
		if err != nil || len(got) != 0 || !strings.Contains(note, "Job strata-system/job-gone of MachineOSBuild worker-gone has no pod") {
			t.Errorf("sources %v note %q err %v", got, note, err)
		}
	})
	t.Run("made in the controller", func(t *testing.T) {
		b := build("worker-layer", nil)
		_, note, err := logSources(ctx, env.Client, b)
		if err != nil || !strings.Contains(note, "ran no build pod") || !strings.Contains(note, "ConfigLayer") {
			t.Errorf("note %q err %v", note, err)
		}
	})
	t.Run("follow waits for a container to start", func(t *testing.T) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: "waiting", Labels: map[string]string{jobNameLabel: "job-w"}},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "pull", Image: "builder"}},
				Containers:     []corev1.Container{{Name: "push", Image: "builder"}},
			},
		}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		o := &logsOptions{pollInterval: 10 * time.Millisecond}
		// Polled this fast, client-go's default rate limiter (5 per
		// second) would refuse the wait before the deadline: the test's
		// own client goes unthrottled to the same API server.
		cfg := rest.CopyConfig(env.Config)
		cfg.QPS = -1
		fast, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		setStatus := func(pull, push corev1.ContainerState) {
			t.Helper()
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "pull", State: pull}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "push", State: push}}
			if err := env.Client.Status().Update(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
		// The pull ended, the push has not started: the wait goes on
		// until the caller gives up.
		setStatus(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}, waiting)
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		follow, err := o.waitStarted(short, fast, logSource{namespace: p.Namespace, pod: p.Name, container: "push"})
		cancel()
		if follow || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("before push started: waitStarted = %v, %v; want it still waiting", follow, err)
		}

		type result struct {
			follow bool
			err    error
		}
		done := make(chan result, 1)
		go func() {
			follow, err := o.waitStarted(ctx, fast, logSource{namespace: p.Namespace, pod: p.Name, container: "push"})
			done <- result{follow, err}
		}()
		setStatus(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
		select {
		case r := <-done:
			if !r.follow || r.err != nil {
				t.Errorf("waitStarted = %v, %v; want to follow the running container", r.follow, r.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("waitStarted did not see push start")
		}

		// A pod that failed before the container ran: nothing to follow.
		p.Status.Phase = corev1.PodFailed
		setStatus(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}, waiting)
		follow, err = o.waitStarted(ctx, env.Client, logSource{namespace: p.Namespace, pod: p.Name, container: "push"})
		if follow || err != nil {
			t.Errorf("on a failed pod: waitStarted = %v, %v; want no follow, no error", follow, err)
		}
	})
	t.Run("command", func(t *testing.T) {
		kubeconfig := writeKubeconfig(t, env.Config)
		cmd := newLogsCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--kubeconfig", kubeconfig, "worker-layer"})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "ran no build pod") || !strings.Contains(out.String(), "==> MachineOSBuild worker-layer: Pending <==") {
			t.Errorf("output:\n%s", out.String())
		}
		cmd = newLogsCommand()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs([]string{"--kubeconfig", kubeconfig, "nothing"})
		if err := cmd.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "no MachineOSBuild named nothing") {
			t.Errorf("error %v, want one naming the build", err)
		}
	})
}

func TestOnlyKeepsTheNamedContainer(t *testing.T) {
	sources := []logSource{{pod: "a", container: "pull"}, {pod: "a", container: "build"}, {pod: "b", container: "build"}, {pod: "b", container: "push"}}
	got, err := only(sources, "build")
	if err != nil || len(got) != 2 || got[0].pod != "a" || got[1].pod != "b" {
		t.Errorf("only(build) = %+v, %v", got, err)
	}
	if got, err := only(sources, ""); err != nil || len(got) != 4 {
		t.Errorf("only(\"\") = %+v, %v; want every source", got, err)
	}
	if _, err := only(sources, "bild"); err == nil || !strings.Contains(err.Error(), `no container "bild"; they have pull, build, push`) {
		t.Errorf("only(bild): error %v, want one listing the containers", err)
	}
}
