package job

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

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
		Annotations: map[string]string{"org.opencontainers.image.base.name": "127.0.0.1:5000/os/base@sha256:" + strings.Repeat("0", 64), "b": "x=y"},
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
	inputs, job, err := Objects(cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	name := "build-worker-abc123"
	wantLabels := map[string]string{LabelMachineOSBuild: "worker-abc123"}
	for _, m := range []metav1.ObjectMeta{inputs.ObjectMeta, job.ObjectMeta} {
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
	if r := js.PodFailurePolicy.Rules[0]; r.Action != batchv1.PodFailurePolicyActionFailJob || r.OnExitCodes == nil ||
		r.OnExitCodes.ContainerName != nil || !reflect.DeepEqual(r.OnExitCodes.Values, []int32{ExitCodePermanent}) {
		t.Errorf("first pod failure policy rule %+v, want FailJob on exit code %d of any container", r, ExitCodePermanent)
	}
	ps := tmpl.Spec
	if ps.RestartPolicy != corev1.RestartPolicyNever || ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("restart policy %s, automount token %v", ps.RestartPolicy, ps.AutomountServiceAccountToken)
	}
	if ps.ShareProcessNamespace != nil && *ps.ShareProcessNamespace {
		t.Error("the containers share a process namespace: the build could read the others' memory")
	}
	if ps.TerminationGracePeriodSeconds == nil || *ps.TerminationGracePeriodSeconds > 30 {
		t.Errorf("termination grace period %v", ps.TerminationGracePeriodSeconds)
	}
	wantSelector := map[string]string{"node-role.kubernetes.io/builder": "", ArchLabel: "amd64"}
	if !ps.HostNetwork || ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet ||
		!reflect.DeepEqual(ps.NodeSelector, wantSelector) || !reflect.DeepEqual(ps.Tolerations, cfg.Placement.Tolerations) {
		t.Errorf("placement not applied (want node selector %v): %+v", wantSelector, ps)
	}
	wantAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.NodeSelectorOpDoesNotExist}},
		}}},
	}}
	if !reflect.DeepEqual(ps.Affinity, wantAffinity) {
		t.Errorf("affinity %+v, want the default that keeps build pods off control-plane nodes", ps.Affinity)
	}

	// Three containers, one after the other: pull and build are init
	// containers, push the pod's container.
	var names []string
	for _, c := range append(append([]corev1.Container(nil), ps.InitContainers...), ps.Containers...) {
		names = append(names, c.Name)
	}
	if !reflect.DeepEqual(names, []string{ContainerPull, ContainerBuild, ContainerPush}) || len(ps.Containers) != 1 {
		t.Fatalf("containers %v (%d regular), want init containers pull, build and the container push", names, len(ps.Containers))
	}
	pull, build, push := ps.InitContainers[0], ps.InitContainers[1], ps.Containers[0]
	volumes := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		volumes[v.Name] = v
	}
	// The placement's memory request, the rest by default, and room for
	// every volume in the ephemeral-storage limit.
	wantResources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("500m"),
			corev1.ResourceMemory:           resource.MustParse("1Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("4"),
			corev1.ResourceMemory:           resource.MustParse("8Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("91Gi"), // 50 + 10 + 3×10 + 1
		},
	}
	for _, c := range []corev1.Container{pull, build, push} {
		if c.Image != cfg.BuilderImage || !equalResources(c.Resources, wantResources) {
			t.Errorf("%s: image %s, resources %v, want %v", c.Name, c.Image, c.Resources, wantResources)
		}
		if want := []string{"/bin/bash", InputsDir + "/build.sh", c.Name}; !reflect.DeepEqual(c.Command, want) || len(c.Args) > 0 {
			t.Errorf("%s: command %q %q, want %q", c.Name, c.Command, c.Args, want)
		}
		if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError || c.TerminationMessagePath != "/dev/termination-log" {
			t.Errorf("%s: termination message %s %s", c.Name, c.TerminationMessagePath, c.TerminationMessagePolicy)
		}
		if len(c.EnvFrom) > 0 {
			t.Errorf("%s: envFrom %+v: credentials must only be mounted", c.Name, c.EnvFrom)
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil {
				t.Errorf("%s: env %s comes from %+v: credentials must only be mounted", c.Name, e.Name, e.ValueFrom)
			}
		}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s mounts volume %s, which the pod does not have", c.Name, m.Name)
			}
			if volumes[m.Name].Secret != nil && !m.ReadOnly {
				t.Errorf("%s mounts Secret volume %s writable", c.Name, m.Name)
			}
		}
	}

	// Credentials: each registry Secret in the one container that uses
	// it, as a volume of its .dockerconfigjson key only; none in the
	// build container.
	secretsOf := func(c corev1.Container) []string {
		var out []string
		for _, m := range c.VolumeMounts {
			if s := volumes[m.Name].Secret; s != nil {
				out = append(out, s.SecretName)
				if s.SecretName != name && !reflect.DeepEqual(s.Items, []corev1.KeyToPath{{Key: ".dockerconfigjson", Path: "auth.json"}}) {
					t.Errorf("registry Secret volume %s items %+v, want only .dockerconfigjson as auth.json", m.Name, s.Items)
				}
			}
		}
		return out
	}
	for c, want := range map[*corev1.Container][]string{&pull: {name, "base-pull"}, &build: {name}, &push: {name, "push-creds"}} {
		if got := secretsOf(*c); !reflect.DeepEqual(got, want) {
			t.Errorf("%s container mounts the Secrets %v, want %v", c.Name, got, want)
		}
	}
	// The build container gets the whole build Secret, the others its
	// script only.
	for _, c := range []corev1.Container{pull, build, push} {
		for _, m := range c.VolumeMounts {
			s := volumes[m.Name].Secret
			if s == nil || s.SecretName != name {
				continue
			}
			full := len(s.Items) == 0
			if full != (c.Name == ContainerBuild) || m.MountPath != InputsDir {
				t.Errorf("%s mounts the build Secret at %s with items %+v", c.Name, m.MountPath, s.Items)
			}
		}
	}
	env := func(c corev1.Container) map[string]string {
		out := map[string]string{}
		for _, e := range c.Env {
			out[e.Name] = e.Value
		}
		return out
	}
	common := map[string]string{
		"STRATA_SCRATCH":             ScratchDir,
		"STRATA_INSECURE_REGISTRIES": "127.0.0.1:5000",
		"STRATA_TERMINATION_LOG":     "/dev/termination-log",
	}
	storage := map[string]string{
		"STRATA_STORAGE":        StorageDir,
		"STRATA_STORAGE_DRIVER": "vfs",
		"STRATA_PLATFORM":       "linux/amd64",
	}
	with := func(m map[string]string, more ...map[string]string) map[string]string {
		for _, add := range append(more, common) {
			for k, v := range add {
				m[k] = v
			}
		}
		return m
	}
	wantEnv := map[string]map[string]string{
		ContainerPull: with(map[string]string{
			"STRATA_BASE_IMAGES":   "1 127.0.0.1:5000/os/base@sha256:" + strings.Repeat("0", 64),
			"STRATA_BASE_AUTHFILE": BaseSecretDir + "/auth.json",
		}, storage),
		ContainerBuild: with(map[string]string{
			"STRATA_LAYOUT":          LayoutDir,
			"STRATA_CONTEXT_ARCHIVE": InputsDir + "/context.tar.gz",
			"STRATA_STEPS":           InputsDir + "/steps",
			// Sorted by key; a value may hold "=".
			"STRATA_ANNOTATIONS": "b=x=y\norg.opencontainers.image.base.name=127.0.0.1:5000/os/base@sha256:" + strings.Repeat("0", 64),
		}, storage),
		ContainerPush: with(map[string]string{
			"STRATA_LAYOUT":        LayoutDir,
			"STRATA_PUSH_SPEC":     req.PushSpec,
			"STRATA_PUSH_AUTHFILE": PushSecretDir + "/auth.json",
		}),
	}
	for _, c := range []corev1.Container{pull, build, push} {
		if got := env(c); !reflect.DeepEqual(got, wantEnv[c.Name]) {
			t.Errorf("%s env %v, want %v", c.Name, got, wantEnv[c.Name])
		}
	}
	// Each container has its own scratch directory. The pull and build
	// share buildah's storage; the push, which holds the push secret,
	// mounts none of it, and reads the build's OCI layout read-only.
	scratch := map[string]bool{}
	shared := map[string][]string{}
	for _, c := range []corev1.Container{pull, build, push} {
		for _, m := range c.VolumeMounts {
			v := volumes[m.Name]
			if v.EmptyDir != nil {
				want := map[string]string{ScratchDir: "10Gi", StorageDir: "50Gi", LayoutDir: "10Gi"}[m.MountPath]
				if v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != want {
					t.Errorf("%s's volume %s at %s has the size limit %v, want %s", c.Name, m.Name, m.MountPath, v.EmptyDir.SizeLimit, want)
				}
			}
			switch m.MountPath {
			case ScratchDir:
				if scratch[m.Name] || v.EmptyDir == nil {
					t.Errorf("%s's scratch volume %s is shared or not an emptyDir", c.Name, m.Name)
				}
				scratch[m.Name] = true
			case StorageDir, LayoutDir:
				if v.EmptyDir == nil {
					t.Errorf("%s's %s is volume %s, not an emptyDir", c.Name, m.MountPath, m.Name)
				}
				if c.Name == ContainerPush && (m.MountPath != LayoutDir || !m.ReadOnly) {
					t.Errorf("the push container mounts %s at %s (read-only: %v); want only the layout, read-only", m.Name, m.MountPath, m.ReadOnly)
				}
				shared[m.MountPath+" "+m.Name] = append(shared[m.MountPath+" "+m.Name], c.Name)
			}
		}
	}
	if len(scratch) != 3 {
		t.Errorf("%d scratch volumes, want one for each container", len(scratch))
	}
	if want := map[string][]string{StorageDir + " storage": {ContainerPull, ContainerBuild}, LayoutDir + " layout": {ContainerBuild, ContainerPush}}; !reflect.DeepEqual(shared, want) {
		t.Errorf("shared volumes %v, want %v", shared, want)
	}
	if ps.HostUsers != nil {
		t.Errorf("hostUsers %v, want it unset when not configured", *ps.HostUsers)
	}
	checkSecurityContexts(t, ps)

	// The Secret: the script, the step map and the context, nothing else.
	if inputs.Type != corev1.SecretTypeOpaque || inputs.Immutable == nil || !*inputs.Immutable {
		t.Errorf("Secret type %s, immutable %v", inputs.Type, inputs.Immutable)
	}
	if len(inputs.Data) != 3 || string(inputs.Data[KeyScript]) != BuildScript() || string(inputs.Data[KeySteps]) != "1 1 1\n1 2 2\n1 3 3\n" {
		t.Errorf("Secret data keys %d, steps %q", len(inputs.Data), inputs.Data[KeySteps])
	}
	files := untar(t, inputs.Data[KeyContext])
	want := map[string]string{}
	for _, f := range req.Result.Context {
		want[f.Name] = string(f.Data)
	}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("context in the Secret %v, want %v", files, want)
	}
	if len(inputs.StringData) > 0 {
		t.Errorf("Secret has stringData %v", inputs.StringData)
	}

	// Same request, same objects.
	inputs2, job2, err := Objects(cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(inputs, inputs2) || !reflect.DeepEqual(job, job2) {
		t.Error("Objects is not deterministic")
	}
}

// equalResources compares requirements by quantity, not by spelling.
func equalResources(a, b corev1.ResourceRequirements) bool {
	eq := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Requests, b.Requests) && eq(a.Limits, b.Limits)
}

// Requests and limits, emptyDir size limits and hostUsers come from the
// configuration; what it leaves unset has its default, and limits that
// cannot work are refused naming the field.
func TestObjectsResources(t *testing.T) {
	cfg, req := testRequest()
	cfg.Placement.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	cfg.VolumeSizeLimits = VolumeSizeLimits{Storage: ptr.To(resource.MustParse("8Gi")), Scratch: ptr.To(resource.MustParse("512Mi"))}
	cfg.HostUsers = ptr.To(false)
	_, job, err := Objects(cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	ps := job.Spec.Template.Spec
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("100m"),
			corev1.ResourceMemory:           resource.MustParse("1Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("4"),
			corev1.ResourceMemory:           resource.MustParse("2Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("20992Mi"), // 8Gi + 10Gi + 3×512Mi + 1Gi
		},
	}
	for _, c := range slices.Concat(ps.InitContainers, ps.Containers) {
		if !equalResources(c.Resources, want) {
			t.Errorf("%s: resources %v, want %v", c.Name, c.Resources, want)
		}
	}
	sizes := map[string]string{}
	for _, v := range ps.Volumes {
		if v.EmptyDir != nil {
			sizes[v.Name] = v.EmptyDir.SizeLimit.String()
		}
	}
	if want := map[string]string{"storage": "8Gi", "layout": "10Gi", "pull-scratch": "512Mi", "build-scratch": "512Mi", "push-scratch": "512Mi"}; !reflect.DeepEqual(sizes, want) {
		t.Errorf("emptyDir size limits %v, want %v", sizes, want)
	}
	if ps.HostUsers == nil || *ps.HostUsers {
		t.Errorf("hostUsers %v, want false as configured", ps.HostUsers)
	}

	// An ephemeral-storage limit the configuration sets is kept.
	cfg.Placement.Resources.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("30Gi")
	if _, job, err = Objects(cfg, req); err != nil {
		t.Fatal(err)
	}
	if got := job.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceEphemeralStorage]; got.String() != "30Gi" {
		t.Errorf("ephemeral-storage limit %s, want the configured 30Gi", got.String())
	}

	for name, edit := range map[string]func(*Config){
		"volumeSizeLimits.layout": func(c *Config) { c.VolumeSizeLimits.Layout = ptr.To(resource.MustParse("0")) },
		"the memory request 3Gi is above its limit 2Gi": func(c *Config) {
			c.Placement.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("3Gi")
		},
	} {
		bad, _ := testRequest()
		bad.Placement.Resources = *cfg.Placement.Resources.DeepCopy()
		bad.VolumeSizeLimits = cfg.VolumeSizeLimits
		edit(&bad)
		if _, _, err := Objects(bad, req); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming it", name, err)
		}
		if err := CheckResources(bad); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("CheckResources, %s: error %v, want one naming it", name, err)
		}
	}
}

// checkSecurityContexts holds the privileges measured on the test cluster
// (see the package comment): no container is privileged or may gain
// privileges or write its own file system, and none keeps a capability
// but the three buildah needs to map IDs into its user namespace; in
// particular none has CAP_SYS_ADMIN. The push container, which runs no
// buildah, keeps none and runs under the runtime's default seccomp
// profile.
func checkSecurityContexts(t *testing.T, ps corev1.PodSpec) {
	t.Helper()
	for _, c := range append(append([]corev1.Container(nil), ps.InitContainers...), ps.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s has no security context", c.Name)
			continue
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s is privileged", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s may gain privileges (allowPrivilegeEscalation %v)", c.Name, sc.AllowPrivilegeEscalation)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s may write its own file system", c.Name)
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			t.Errorf("%s unmasks /proc", c.Name)
		}
		if c.Name == ContainerPush {
			// skopeo alone, holding the push secret: nothing to keep.
			if want := (&corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}); !reflect.DeepEqual(sc.Capabilities, want) {
				t.Errorf("%s capabilities %+v, want %+v", c.Name, sc.Capabilities, want)
			}
			if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s seccomp profile %+v, want RuntimeDefault: it runs no buildah", c.Name, sc.SeccompProfile)
			}
			continue
		}
		want := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"SETUID", "SETGID", "SETFCAP"}}
		if !reflect.DeepEqual(sc.Capabilities, want) {
			t.Errorf("%s capabilities %+v, want %+v", c.Name, sc.Capabilities, want)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeUnconfined {
			t.Errorf("%s seccomp profile %+v: buildah needs to make a user namespace, which the runtime's default refuses", c.Name, sc.SeccompProfile)
		}
	}
	if ps.HostPID || ps.HostIPC || (ps.SecurityContext != nil && ps.SecurityContext.SeccompProfile != nil) {
		t.Errorf("host PID %v, host IPC %v, pod security context %+v", ps.HostPID, ps.HostIPC, ps.SecurityContext)
	}
}

func TestObjectsOptional(t *testing.T) {
	cfg, req := testRequest()
	cfg.ActiveDeadlineSeconds = 600
	cfg.InsecureRegistries = nil
	cfg.Placement = Placement{}
	req.BaseImagePullSecret, req.PushSecret = "", ""
	// An admin stage has no annotations.
	req.Result.Annotations = nil
	inputs, job, err := Objects(cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	if *job.Spec.ActiveDeadlineSeconds != 600 {
		t.Errorf("deadline %d", *job.Spec.ActiveDeadlineSeconds)
	}
	ps := job.Spec.Template.Spec
	for _, v := range ps.Volumes {
		if v.Secret != nil && v.Secret.SecretName != inputs.Name {
			t.Errorf("registry Secret volume %s without registry Secrets", v.Name)
		}
	}
	for _, c := range append(append([]corev1.Container(nil), ps.InitContainers...), ps.Containers...) {
		for _, e := range c.Env {
			if strings.HasSuffix(e.Name, "_AUTHFILE") || (e.Name == "STRATA_INSECURE_REGISTRIES" && e.Value != "") || e.Name == "STRATA_ANNOTATIONS" {
				t.Errorf("%s: env %s=%q", c.Name, e.Name, e.Value)
			}
		}
	}
	if ps.HostNetwork || ps.DNSPolicy != "" {
		t.Errorf("host network %v, DNS policy %q", ps.HostNetwork, ps.DNSPolicy)
	}
}

// TestObjectsAffinity: the placement's node affinity replaces the default
// one, which keeps build pods off control-plane nodes; its other
// affinities are kept alongside the default.
func TestObjectsAffinity(t *testing.T) {
	onBuilders := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "node-role.kubernetes.io/builder", Operator: corev1.NodeSelectorOpExists}}}},
	}}
	antiAffinity := &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
		Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname"}}}}
	cases := []struct {
		name      string
		placement *corev1.Affinity
		want      func(*corev1.Affinity) bool
	}{
		{"default", nil, func(a *corev1.Affinity) bool { return offControlPlane(a.NodeAffinity) && a.PodAntiAffinity == nil }},
		{"node affinity replaces the default", &corev1.Affinity{NodeAffinity: onBuilders},
			func(a *corev1.Affinity) bool { return reflect.DeepEqual(a.NodeAffinity, onBuilders) }},
		{"empty node affinity allows every node", &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}},
			func(a *corev1.Affinity) bool { return reflect.DeepEqual(a.NodeAffinity, &corev1.NodeAffinity{}) }},
		{"pod anti-affinity keeps the default", &corev1.Affinity{PodAntiAffinity: antiAffinity},
			func(a *corev1.Affinity) bool {
				return offControlPlane(a.NodeAffinity) && reflect.DeepEqual(a.PodAntiAffinity, antiAffinity)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, req := testRequest()
			cfg.Placement.Affinity = c.placement
			before := c.placement.DeepCopy()
			_, job, err := Objects(cfg, req)
			if err != nil {
				t.Fatal(err)
			}
			if got := job.Spec.Template.Spec.Affinity; got == nil || !c.want(got) {
				t.Errorf("affinity %+v", got)
			}
			if !reflect.DeepEqual(c.placement, before) {
				t.Error("Objects changed the configuration's affinity")
			}
		})
	}
}

func offControlPlane(na *corev1.NodeAffinity) bool {
	if na == nil || na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	return len(terms) == 1 && reflect.DeepEqual(terms[0].MatchExpressions,
		[]corev1.NodeSelectorRequirement{{Key: LabelControlPlane, Operator: corev1.NodeSelectorOpDoesNotExist}})
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
		}, "more than the 921600 a Secret can carry"},
		{"base image from an ARG", func(_ *Config, r *Request) {
			r.Result.Containerfile = []byte("ARG BASE=x\nFROM $BASE\n")
		}, "FROM $BASE (Containerfile line 2) must be named without ARGs"},
		{"no base image", func(_ *Config, r *Request) { r.Result.Containerfile = []byte("FROM scratch\nCOPY x /x\n") }, "names no base image"},
		{"no build", func(_ *Config, r *Request) { r.Build = nil }, "MachineOSBuild"},
		{"no UID", func(_ *Config, r *Request) { r.Build.UID = "" }, "UID"},
		{"no Containerfile", func(_ *Config, r *Request) { r.Result = &containerfile.Result{} }, "Containerfile"},
		{"no push spec", func(_ *Config, r *Request) { r.PushSpec = "" }, "push spec"},
		{"no namespace", func(c *Config, _ *Request) { c.Namespace = "" }, "namespace"},
		{"no image", func(c *Config, _ *Request) { c.BuilderImage = "" }, "builder image"},
		{"bad secret", func(_ *Config, r *Request) { r.PushSecret = "Not_A_Name" }, "push secret"},
		{"bad insecure registry", func(c *Config, _ *Request) { c.InsecureRegistries = []string{"a,b"} }, "insecure registry"},
		{"annotation with a newline", func(_ *Config, r *Request) { r.Result.Annotations = map[string]string{"a": "1\nb=2"} }, `annotation "a"="1\nb=2" cannot be passed`},
		{"annotation key with =", func(_ *Config, r *Request) { r.Result.Annotations = map[string]string{"a=b": "1"} }, `annotation "a=b"="1" cannot be passed`},
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

func TestBaseImages(t *testing.T) {
	cf := `ARG V=1
FROM r.example/a@sha256:aa AS one
RUN a
FROM scratch AS two
FROM one
FROM r.example/b:1 as b
FROM r.example/a@sha256:aa
FROM --platform=linux/amd64 r.example/c:2
FROM b
`
	got, err := BaseImages([]byte(cf))
	if err != nil {
		t.Fatal(err)
	}
	want := []BaseImage{{2, "r.example/a@sha256:aa"}, {6, "r.example/b:1"}, {8, "r.example/c:2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BaseImages = %+v, want %+v", got, want)
	}
	// A stage named like an image counts only after its FROM.
	got, err = BaseImages([]byte("FROM r.example/x AS r.example/x\nFROM r.example/x\n"))
	if err != nil || !reflect.DeepEqual(got, []BaseImage{{1, "r.example/x"}}) {
		t.Errorf("BaseImages = %+v, %v", got, err)
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

// A build runs on a node of the target architecture, and buildah pulls and
// builds for it.
func TestObjectsArchitecture(t *testing.T) {
	cfg, req := testRequest()
	cfg.Arch = "arm64"
	_, job, err := Objects(cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	ps := job.Spec.Template.Spec
	if got := ps.NodeSelector[ArchLabel]; got != "arm64" {
		t.Errorf("node selector %v, want %s=arm64", ps.NodeSelector, ArchLabel)
	}
	// The push copies a layout as it is: it pulls and builds nothing.
	for _, c := range ps.InitContainers {
		if !slices.Contains(c.Env, corev1.EnvVar{Name: "STRATA_PLATFORM", Value: "linux/arm64"}) {
			t.Errorf("container %s is not told the platform: %v", c.Name, c.Env)
		}
	}
	cfg.Placement.NodeSelector = map[string]string{ArchLabel: "arm64", "pool": "builders"}
	if _, job, err = Objects(cfg, req); err != nil {
		t.Fatal(err)
	}
	if got := job.Spec.Template.Spec.NodeSelector; !reflect.DeepEqual(got, cfg.Placement.NodeSelector) {
		t.Errorf("node selector %v, want the placement's %v", got, cfg.Placement.NodeSelector)
	}
}
