package job

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
)

func TestJobName(t *testing.T) {
	long := "worker-" + strings.Repeat("a", 70)
	cases := []struct {
		build, want string
	}{
		{"worker-0123abcd", "build-worker-0123abcd"},
		{"worker.example-1", ""},
		{long, ""},
		{long + "b", ""},
		{strings.Repeat("x", 253), ""},
	}
	seen := map[string]string{}
	for _, c := range cases {
		got := JobName(c.build)
		if msgs := validation.IsDNS1123Label(got); len(msgs) > 0 {
			t.Errorf("JobName(%q) = %q, not a DNS label: %v", c.build, got, msgs)
		}
		if c.want != "" && got != c.want {
			t.Errorf("JobName(%q) = %q, want %q", c.build, got, c.want)
		}
		if got != JobName(c.build) {
			t.Errorf("JobName(%q) is not deterministic", c.build)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("JobName(%q) = JobName(%q) = %q", c.build, other, got)
		}
		seen[got] = c.build
		lv := LabelValue(c.build)
		if msgs := validation.IsValidLabelValue(lv); len(msgs) > 0 {
			t.Errorf("LabelValue(%q) = %q, not a label value: %v", c.build, lv, msgs)
		}
	}
	if got := JobName("a.b"); got == JobName("a-b") {
		t.Errorf("JobName(a.b) = JobName(a-b) = %q", got)
	}
	if got := LabelValue("worker.example-1"); got != "worker.example-1" {
		t.Errorf("LabelValue keeps valid names: got %q", got)
	}
}

func testRequest() (Config, Request) {
	cf := "FROM 127.0.0.1:5000/os/base@sha256:" + strings.Repeat("0", 64) + "\nADD rootfs.tar /\nRUN false\n"
	res := &containerfile.Result{
		Containerfile: []byte(cf),
		Context: []containerfile.ContextFile{
			{Name: "Containerfile", Data: []byte(cf)},
			{Name: "append/0000", Data: []byte("appended\n")},
			{Name: "rootfs.tar", Data: []byte("not really a tar")},
		},
	}
	cfg := Config{
		Namespace:    "strata-system",
		BuilderImage: "127.0.0.1:5000/strata/builder:v1",
		BackoffLimit: 1,
		Placement: Placement{
			NodeSelector: map[string]string{"node-role.kubernetes.io/builder": ""},
			Tolerations:  []corev1.Toleration{{Key: "builder", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse("1Gi"),
			}},
			HostNetwork: true,
		},
		InsecureRegistries: []string{"127.0.0.1:5000"},
	}
	req := Request{
		Build:               &v1alpha1.MachineOSBuild{ObjectMeta: metav1.ObjectMeta{Name: "worker-abc123", UID: "1234-uid"}},
		Result:              res,
		BaseImagePullSecret: "base-pull",
		PushSecret:          "push-creds",
		PushSpec:            "registry.example.com/os/worker:latest",
	}
	return cfg, req
}

func TestObjects(t *testing.T) {
	cfg, req := testRequest()
	cm, job, err := Objects(cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	name := "build-worker-abc123"
	wantLabels := map[string]string{LabelMachineOSBuild: "worker-abc123"}
	for _, m := range []metav1.ObjectMeta{cm.ObjectMeta, job.ObjectMeta} {
		if m.Name != name || m.Namespace != "strata-system" {
			t.Errorf("object %s/%s, want strata-system/%s", m.Namespace, m.Name, name)
		}
		if !reflect.DeepEqual(m.Labels, wantLabels) {
			t.Errorf("labels of %s = %v, want %v", m.Name, m.Labels, wantLabels)
		}
		if len(m.OwnerReferences) != 1 {
			t.Fatalf("owner references %v, want one", m.OwnerReferences)
		}
		o := m.OwnerReferences[0]
		if o.APIVersion != "machineconfiguration.strata.dev/v1alpha1" || o.Kind != "MachineOSBuild" ||
			o.Name != "worker-abc123" || o.UID != "1234-uid" || o.Controller == nil || !*o.Controller {
			t.Errorf("owner reference %+v, want the controlling MachineOSBuild", o)
		}
	}
	tmpl := job.Spec.Template
	if !reflect.DeepEqual(tmpl.Labels, PodLabels("worker-abc123")) {
		t.Errorf("pod labels %v, want PodLabels %v", tmpl.Labels, PodLabels("worker-abc123"))
	}

	// The Job.
	js := job.Spec
	if *js.BackoffLimit != 1 || *js.ActiveDeadlineSeconds != DefaultActiveDeadlineSeconds || js.TTLSecondsAfterFinished != nil {
		t.Errorf("backoff %d, deadline %d, ttl %v", *js.BackoffLimit, *js.ActiveDeadlineSeconds, js.TTLSecondsAfterFinished)
	}
	ps := tmpl.Spec
	if ps.RestartPolicy != corev1.RestartPolicyNever || ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("restart policy %s, automount token %v", ps.RestartPolicy, ps.AutomountServiceAccountToken)
	}
	if ps.TerminationGracePeriodSeconds == nil || *ps.TerminationGracePeriodSeconds > 30 {
		t.Errorf("termination grace period %v", ps.TerminationGracePeriodSeconds)
	}
	if !ps.HostNetwork || ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet ||
		!reflect.DeepEqual(ps.NodeSelector, cfg.Placement.NodeSelector) || !reflect.DeepEqual(ps.Tolerations, cfg.Placement.Tolerations) {
		t.Errorf("placement not applied: %+v", ps)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers", len(ps.Containers))
	}
	c := ps.Containers[0]
	if !reflect.DeepEqual(c.Resources, cfg.Placement.Resources) {
		t.Errorf("resources %v, want %v", c.Resources, cfg.Placement.Resources)
	}
	if c.Image != cfg.BuilderImage || c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("image %s, security context %+v", c.Image, c.SecurityContext)
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError || c.TerminationMessagePath != "/dev/termination-log" {
		t.Errorf("termination message %s %s", c.TerminationMessagePath, c.TerminationMessagePolicy)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			t.Errorf("env %s comes from %+v: credentials must only be mounted", e.Name, e.ValueFrom)
		}
		env[e.Name] = e.Value
	}
	if len(c.EnvFrom) > 0 {
		t.Errorf("envFrom %+v: credentials must only be mounted", c.EnvFrom)
	}
	wantEnv := map[string]string{
		"STRATA_BASE_AUTHFILE":       BaseSecretDir + "/auth.json",
		"STRATA_PUSH_AUTHFILE":       PushSecretDir + "/auth.json",
		"STRATA_PUSH_SPEC":           req.PushSpec,
		"STRATA_INSECURE_REGISTRIES": "127.0.0.1:5000",
		"STRATA_CONTEXT_ARCHIVE":     BuildDir + "/context.tar.gz",
		"STRATA_TERMINATION_LOG":     "/dev/termination-log",
		"TMPDIR":                     WorkDir + "/tmp",
	}
	for k, v := range wantEnv {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
		if strings.Contains(a, "tls-verify") || strings.Contains(a, "auth") {
			t.Errorf("argument %q: TLS and credentials go through files", a)
		}
	}

	// Secrets: only as volumes, only their .dockerconfigjson key.
	secrets := map[string]string{}
	mounted := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounted[m.Name] = m.ReadOnly || m.MountPath == WorkDir
	}
	for _, v := range ps.Volumes {
		if !mounted[v.Name] {
			t.Errorf("volume %s is not mounted (read-only)", v.Name)
		}
		if v.Secret == nil {
			continue
		}
		want := []corev1.KeyToPath{{Key: ".dockerconfigjson", Path: "auth.json"}}
		if !reflect.DeepEqual(v.Secret.Items, want) {
			t.Errorf("secret volume %s items %+v, want %+v", v.Name, v.Secret.Items, want)
		}
		secrets[v.Secret.SecretName] = v.Name
	}
	if len(secrets) != 2 || secrets["base-pull"] == "" || secrets["push-creds"] == "" {
		t.Errorf("secret volumes %v, want base-pull and push-creds", secrets)
	}

	// The ConfigMap: the script, the step map and the context, nothing else.
	if len(cm.Data) != 2 || cm.Data[KeyScript] != BuildScript() || cm.Data[KeySteps] != "1 1 1\n1 2 2\n1 3 3\n" {
		t.Errorf("ConfigMap data %v", cm.Data)
	}
	if len(cm.BinaryData) != 1 {
		t.Errorf("ConfigMap binaryData keys %d, want only %s", len(cm.BinaryData), KeyContext)
	}
	files := untar(t, cm.BinaryData[KeyContext])
	want := map[string]string{}
	for _, f := range req.Result.Context {
		want[f.Name] = string(f.Data)
	}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("context in the ConfigMap %v, want %v", files, want)
	}
	for _, s := range []string{"base-pull", "push-creds", "dockerconfigjson"} {
		for k, v := range cm.Data {
			if k != KeyScript && strings.Contains(v, s) {
				t.Errorf("ConfigMap key %s mentions %q", k, s)
			}
		}
	}

	// Same request, same objects.
	cm2, job2, err := Objects(cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cm, cm2) || !reflect.DeepEqual(job, job2) {
		t.Error("Objects is not deterministic")
	}
}

func TestObjectsOptional(t *testing.T) {
	cfg, req := testRequest()
	cfg.ActiveDeadlineSeconds = 600
	cfg.InsecureRegistries = nil
	cfg.Placement = Placement{}
	req.BaseImagePullSecret, req.PushSecret = "", ""
	_, job, err := Objects(cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	if *job.Spec.ActiveDeadlineSeconds != 600 {
		t.Errorf("deadline %d", *job.Spec.ActiveDeadlineSeconds)
	}
	ps := job.Spec.Template.Spec
	for _, v := range ps.Volumes {
		if v.Secret != nil {
			t.Errorf("secret volume %s without secrets", v.Name)
		}
	}
	for _, e := range ps.Containers[0].Env {
		if strings.HasSuffix(e.Name, "_AUTHFILE") || (e.Name == "STRATA_INSECURE_REGISTRIES" && e.Value != "") {
			t.Errorf("env %s=%q", e.Name, e.Value)
		}
	}
	if ps.HostNetwork || ps.DNSPolicy != "" {
		t.Errorf("host network %v, DNS policy %q", ps.HostNetwork, ps.DNSPolicy)
	}
}

func TestObjectsErrors(t *testing.T) {
	big := make([]byte, 1<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		modify func(*Config, *Request)
		want   string
	}{
		{"context too large", func(_ *Config, r *Request) {
			r.Result.Context = append(r.Result.Context, containerfile.ContextFile{Name: "big", Data: big})
		}, "more than the 921600 a ConfigMap can carry"},
		{"no build", func(_ *Config, r *Request) { r.Build = nil }, "MachineOSBuild"},
		{"no UID", func(_ *Config, r *Request) { r.Build.UID = "" }, "UID"},
		{"no Containerfile", func(_ *Config, r *Request) { r.Result = &containerfile.Result{} }, "Containerfile"},
		{"no push spec", func(_ *Config, r *Request) { r.PushSpec = "" }, "push spec"},
		{"no namespace", func(c *Config, _ *Request) { c.Namespace = "" }, "namespace"},
		{"no image", func(c *Config, _ *Request) { c.BuilderImage = "" }, "builder image"},
		{"bad secret", func(_ *Config, r *Request) { r.PushSecret = "Not_A_Name" }, "push secret"},
		{"bad insecure registry", func(c *Config, _ *Request) { c.InsecureRegistries = []string{"a,b"} }, "insecure registry"},
		// buildah would refuse it too; the step map is made from the same
		// parse, so the build fails at Prepare, not in a pod.
		{"bad Containerfile", func(_ *Config, r *Request) { r.Result.Containerfile = []byte("FROM x\nRUN <<EOF\necho unterminated\n") },
			"map Containerfile steps to lines: parse Containerfile: unterminated heredoc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, req := testRequest()
			c.modify(&cfg, &req)
			_, _, err := Objects(cfg, req)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestStepMap(t *testing.T) {
	cf := `ARG BASE=x
FROM $BASE AS one
RUN a && \
    b
COPY x /x

FROM scratch
# a comment
COPY --from=one /x /y
RUN false
`
	got, err := StepMap([]byte(cf))
	if err != nil {
		t.Fatal(err)
	}
	want := "1 1 2\n1 2 3\n1 3 5\n2 1 7\n2 2 9\n2 3 10\n"
	if got != want {
		t.Errorf("StepMap = %q, want %q", got, want)
	}
}

func untar(t *testing.T, gz []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = string(b)
		}
	}
}
