package diskjob

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/job"
)

const image = "registry.example.com/strata/os-worker@sha256:1111111111111111111111111111111111111111111111111111111111111111"

func request() Request {
	return Request{
		Build:      &v1alpha1.MachineOSBuild{ObjectMeta: metav1.ObjectMeta{Name: "worker-0123456789abcdef", UID: "uid-1"}},
		Image:      image,
		SizeMiB:    4096,
		PushSecret: "push-secret",
	}
}

var cfg = Config{Namespace: "strata-system", Image: "registry.example.com/strata/bootdisk@sha256:" + strings.Repeat("2", 64), InsecureRegistries: []string{"127.0.0.1:5000"}}

func TestObjects(t *testing.T) {
	jb, err := Objects(cfg, request())
	if err != nil {
		t.Fatal(err)
	}
	if jb.Name != "bootdisk-worker-0123456789abcdef" || jb.Namespace != "strata-system" {
		t.Errorf("Job %s/%s", jb.Namespace, jb.Name)
	}
	if o := metav1.GetControllerOf(jb); o == nil || o.Kind != "MachineOSBuild" || o.Name != "worker-0123456789abcdef" {
		t.Errorf("controller of the Job = %+v, want the build", o)
	}
	pod := jb.Spec.Template
	if pod.Labels[LabelBootDisk] != "worker-0123456789abcdef" || pod.Labels[job.LabelMachineOSBuild] != "" {
		t.Errorf("pod labels %v: want the boot disk label and not the build pod's", pod.Labels)
	}
	if *pod.Spec.AutomountServiceAccountToken {
		t.Error("the pod gets a service account token")
	}
	c := pod.Spec.Containers[0]
	for _, want := range []string{"--image=" + image, "--size-mib=4096", "--auth-file=" + PushSecretDir + "/auth.json", "--insecure-registry=127.0.0.1:5000"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	// The credentials are a mounted file, never a value in the pod spec.
	raw, _ := json.Marshal(jb)
	if strings.Contains(string(raw), "dockerconfigjson\":") || len(c.EnvFrom) > 0 {
		t.Errorf("the Job carries credentials: %s", raw)
	}
	sc := c.SecurityContext
	if *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || sc.Privileged != nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || slices.Contains(sc.Capabilities.Add, "SYS_ADMIN") {
		t.Errorf("security context %+v", sc)
	}
	if l := pod.Spec.Volumes[0].EmptyDir.SizeLimit; l == nil || l.Value() != 3*4096<<20+1<<30 {
		t.Errorf("work volume limit %v", l)
	}
}

func TestObjectsRefuses(t *testing.T) {
	for name, edit := range map[string]func(*Config, *Request){
		"no image configured": func(c *Config, _ *Request) { c.Image = "" },
		"image by tag":        func(_ *Config, r *Request) { r.Image = "registry.example.com/x:latest" },
		"size":                func(_ *Config, r *Request) { r.SizeMiB = 10 },
		"secret name":         func(_ *Config, r *Request) { r.PushSecret = "Not_A_Name" },
	} {
		c, r := cfg, request()
		edit(&c, &r)
		if _, err := Objects(c, r); err == nil {
			t.Errorf("%s: Objects accepted it", name)
		}
	}
}

func TestJobName(t *testing.T) {
	for _, build := range []string{"worker-0123456789abcdef", strings.Repeat("a", 60) + "-0123456789abcdef", "pool.with.dots-0123456789abcdef"} {
		n := JobName(build)
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("JobName(%q) = %q: %v", build, n, errs)
		}
		if JobName(build+"x") == n {
			t.Errorf("JobName(%q) collides with another build's", build)
		}
	}
}

func terminated(phase corev1.PodPhase, exit int32, msg string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bootdisk-x-abcde"},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
			Name: Container, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg}},
		}}},
	}
}

func TestInterpret(t *testing.T) {
	jb := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "bootdisk-x"}}
	failedJob := jb.DeepCopy()
	failedJob.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy}}
	ok := `{"artifact":"r.example.com/a@sha256:` + strings.Repeat("3", 64) + `","size":4294967296,"rawDigest":"sha256:` + strings.Repeat("4", 64) + `","compressedSize":1000}`
	for _, c := range []struct {
		name        string
		jb          *batchv1.Job
		pods        []corev1.Pod
		phase       job.Phase
		step        v1alpha1.BuildStep
		wantMessage string
	}{
		{"no pod yet", jb, nil, job.PhasePending, "", ""},
		{"published", jb, []corev1.Pod{terminated(corev1.PodSucceeded, 0, ok)}, job.PhaseSucceeded, "", ""},
		{"succeeded without a report", jb, []corev1.Pod{terminated(corev1.PodSucceeded, 0, "done")}, job.PhaseFailed, v1alpha1.BuildStepUnknown, "did not report"},
		{"disk failed", failedJob, []corev1.Pod{terminated(corev1.PodFailed, job.ExitCodePermanent,
			`{"step":"Disk","message":"the image does not fit in a disk of spec.bootDisk.sizeMiB 512 MiB"}`)}, job.PhaseFailed, v1alpha1.BuildStepDisk, "spec.bootDisk.sizeMiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := Interpret(c.jb, c.pods)
			if st.Phase != c.phase {
				t.Fatalf("phase %s, want %s (%+v)", st.Phase, c.phase, st.Failure)
			}
			if c.phase == job.PhaseSucceeded && (st.Report == nil || st.Report.Size != 4294967296) {
				t.Errorf("report %+v", st.Report)
			}
			if c.step != "" && (st.Failure == nil || st.Failure.Step != c.step || !strings.Contains(st.Failure.Message, c.wantMessage)) {
				t.Errorf("failure %+v, want step %s saying %q", st.Failure, c.step, c.wantMessage)
			}
		})
	}
}
