package jobkit_test

import (
	"reflect"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/jobkit"
)

func skeleton() jobkit.Job {
	sc := jobkit.SecurityContext([]corev1.Capability{"CHOWN"}, corev1.SeccompProfileTypeRuntimeDefault)
	return jobkit.Job{
		Name:                         "kind-worker-1",
		Namespace:                    "strata-system",
		Owner:                        &v1alpha1.MachineOSBuild{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", UID: "uid-1"}},
		Labels:                       map[string]string{"example.com/build": "worker-1"},
		BackoffLimit:                 2,
		DefaultActiveDeadlineSeconds: 600,
		Placement: jobkit.Placement{
			NodeSelector: map[string]string{"node-role.kubernetes.io/builder": ""},
			Tolerations:  []corev1.Toleration{{Key: "builder", Operator: corev1.TolerationOpExists}},
		},
		InitContainers: []corev1.Container{jobkit.Container("first", "img:1", sc)},
		Containers:     []corev1.Container{jobkit.Container("last", "img:1", sc)},
	}
}

// TestNewJob: what every Job of the builder has, whatever its pod runs.
func TestNewJob(t *testing.T) {
	in := skeleton()
	jb := jobkit.NewJob(in)

	if jb.APIVersion != "batch/v1" || jb.Kind != "Job" || jb.Name != "kind-worker-1" || jb.Namespace != "strata-system" {
		t.Errorf("Job %s %s %s/%s", jb.APIVersion, jb.Kind, jb.Namespace, jb.Name)
	}
	if o := metav1.GetControllerOf(jb); o == nil || o.Kind != "MachineOSBuild" || o.Name != "worker-1" || o.UID != "uid-1" ||
		o.APIVersion != v1alpha1.GroupVersion.String() {
		t.Errorf("controller %+v, want the build", o)
	}
	for what, l := range map[string]map[string]string{"Job": jb.Labels, "pod": jb.Spec.Template.Labels} {
		if !reflect.DeepEqual(l, in.Labels) {
			t.Errorf("%s labels %v, want %v", what, l, in.Labels)
		}
	}
	jb.Labels["x"], jb.Spec.Template.Labels["y"] = "1", "2"
	if len(in.Labels) != 1 {
		t.Error("the Job shares its labels with the caller's map")
	}

	s := jb.Spec
	if *s.Completions != 1 || *s.Parallelism != 1 || *s.BackoffLimit != 2 || *s.ActiveDeadlineSeconds != 600 {
		t.Errorf("completions %d parallelism %d backoff %d deadline %d, want 1 1 2 and the default 600",
			*s.Completions, *s.Parallelism, *s.BackoffLimit, *s.ActiveDeadlineSeconds)
	}
	rules := s.PodFailurePolicy.Rules
	if len(rules) != 2 {
		t.Fatalf("pod failure rules %+v", rules)
	}
	if r := rules[0]; r.Action != batchv1.PodFailurePolicyActionFailJob || r.OnExitCodes == nil || r.OnExitCodes.ContainerName != nil ||
		r.OnExitCodes.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn || !reflect.DeepEqual(r.OnExitCodes.Values, []int32{jobkit.ExitCodePermanent}) {
		t.Errorf("first rule %+v, want ExitCodePermanent of any container to fail the Job", r)
	}
	if r := rules[1]; r.Action != batchv1.PodFailurePolicyActionIgnore || len(r.OnPodConditions) != 1 || r.OnPodConditions[0].Type != corev1.DisruptionTarget {
		t.Errorf("second rule %+v, want disruptions ignored", r)
	}

	ps := s.Template.Spec
	if ps.RestartPolicy != corev1.RestartPolicyNever || *ps.TerminationGracePeriodSeconds != 5 ||
		*ps.AutomountServiceAccountToken || *ps.EnableServiceLinks || ps.HostUsers != nil || ps.HostNetwork || ps.DNSPolicy != "" {
		t.Errorf("pod spec %+v", ps)
	}
	if want := map[string]string{"node-role.kubernetes.io/builder": "", jobkit.ArchLabel: "amd64"}; !reflect.DeepEqual(ps.NodeSelector, want) {
		t.Errorf("node selector %v, want %v", ps.NodeSelector, want)
	}
	if !reflect.DeepEqual(ps.Tolerations, in.Placement.Tolerations) {
		t.Errorf("tolerations %v", ps.Tolerations)
	}
	if na := ps.Affinity.NodeAffinity; na == nil || na.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != jobkit.LabelControlPlane {
		t.Errorf("affinity %+v, want the pods kept off control-plane nodes", ps.Affinity)
	}
	if len(ps.InitContainers) != 1 || ps.InitContainers[0].Name != "first" || len(ps.Containers) != 1 || ps.Containers[0].Name != "last" {
		t.Errorf("containers %+v %+v", ps.InitContainers, ps.Containers)
	}
	for _, c := range append(ps.InitContainers, ps.Containers...) {
		if c.TerminationMessagePath != corev1.TerminationMessagePathDefault || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError ||
			c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("%s: termination message %s %s, pull policy %s", c.Name, c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy)
		}
		sc := c.SecurityContext
		if sc.Privileged != nil || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
			!reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !reflect.DeepEqual(sc.Capabilities.Add, []corev1.Capability{"CHOWN"}) ||
			sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: security context %+v", c.Name, sc)
		}
	}
}

// TestNewJobConfigured: what the configuration changes, and that the Job
// shares nothing with it.
func TestNewJobConfigured(t *testing.T) {
	in := skeleton()
	in.ActiveDeadlineSeconds = 60
	in.PermanentContainer = "last"
	in.Arch = "arm64"
	in.HostUsers = ptr.To(false)
	in.Placement.HostNetwork = true
	in.Placement.NodeSelector = map[string]string{jobkit.ArchLabel: "s390x"}
	onBuilders := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "builder", Operator: corev1.NodeSelectorOpExists}},
	}}}}
	in.Placement.Affinity = &corev1.Affinity{NodeAffinity: onBuilders}
	jb := jobkit.NewJob(in)

	if d := *jb.Spec.ActiveDeadlineSeconds; d != 60 {
		t.Errorf("deadline %d, want the configured 60", d)
	}
	if c := jb.Spec.PodFailurePolicy.Rules[0].OnExitCodes.ContainerName; c == nil || *c != "last" {
		t.Errorf("permanent exit codes of container %v, want last", c)
	}
	ps := jb.Spec.Template.Spec
	if !ps.HostNetwork || ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("host network %v with DNS policy %q", ps.HostNetwork, ps.DNSPolicy)
	}
	if ps.NodeSelector[jobkit.ArchLabel] != "s390x" {
		t.Errorf("node selector %v, want the configured architecture label kept", ps.NodeSelector)
	}
	if !reflect.DeepEqual(ps.Affinity.NodeAffinity, onBuilders) {
		t.Errorf("node affinity %+v, want the configured one", ps.Affinity.NodeAffinity)
	}
	if ps.HostUsers == nil || *ps.HostUsers || ps.HostUsers == in.HostUsers {
		t.Errorf("hostUsers %v, want a copy of false", ps.HostUsers)
	}
	ps.NodeSelector["x"] = "y"
	ps.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = nil
	if len(in.Placement.NodeSelector) != 1 || onBuilders.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Error("the Job shares its placement with the configuration")
	}

	in.Placement.NodeSelector = nil
	if got := jobkit.NewJob(in).Spec.Template.Spec.NodeSelector[jobkit.ArchLabel]; got != "arm64" {
		t.Errorf("architecture %q, want the configured arm64", got)
	}
}

func TestAuthFile(t *testing.T) {
	v, m, path := jobkit.AuthFile("push-creds", "push-secret", "/var/run/secrets/push")
	want := corev1.Volume{Name: "push-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  "push-creds",
		Items:       []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: jobkit.AuthFileName}},
		DefaultMode: ptr.To(int32(0o400)),
	}}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("volume %+v, want %+v", v, want)
	}
	if !reflect.DeepEqual(m, corev1.VolumeMount{Name: "push-secret", MountPath: "/var/run/secrets/push", ReadOnly: true}) || path != "/var/run/secrets/push/auth.json" {
		t.Errorf("mount %+v, path %q", m, path)
	}
	if v := jobkit.SecretVolume("inputs", "build-x"); v.Secret.Items != nil || *v.Secret.DefaultMode != 0o400 {
		t.Errorf("whole Secret volume %+v", v.Secret)
	}
}

func TestName(t *testing.T) {
	long := "worker-" + strings.Repeat("a", 70)
	seen := map[string]string{}
	for _, prefix := range []string{"build-", "bootdisk-"} {
		for _, build := range []string{"worker-0123abcd", "worker.example-1", "a.b", "a-b", long, long + "b", strings.Repeat("x", 253)} {
			got := jobkit.Name(prefix, build)
			if msgs := validation.IsDNS1123Label(got); len(msgs) > 0 {
				t.Errorf("Name(%q, %q) = %q, not a DNS label: %v", prefix, build, got, msgs)
			}
			if !strings.HasPrefix(got, prefix) || got != jobkit.Name(prefix, build) {
				t.Errorf("Name(%q, %q) = %q: not prefixed, or not the same each time", prefix, build, got)
			}
			if other, ok := seen[got]; ok {
				t.Errorf("Name(%q, %q) = %q, as for %q", prefix, build, got, other)
			}
			seen[got] = prefix + build
			if lv := jobkit.LabelValue(build); len(validation.IsValidLabelValue(lv)) > 0 {
				t.Errorf("LabelValue(%q) = %q, not a label value", build, lv)
			}
		}
	}
	if got := jobkit.Name("bootdisk-", "worker-0123abcd"); got != "bootdisk-worker-0123abcd" {
		t.Errorf("Name keeps a valid name: got %q", got)
	}
	if got := jobkit.LabelValue("worker.example-1"); got != "worker.example-1" {
		t.Errorf("LabelValue keeps a valid value: got %q", got)
	}
}

func TestChecks(t *testing.T) {
	for _, b := range []*v1alpha1.MachineOSBuild{nil, {}, {ObjectMeta: metav1.ObjectMeta{Name: "x"}}} {
		if jobkit.CheckOwner(b) == nil {
			t.Errorf("CheckOwner(%+v) accepted it", b)
		}
	}
	if err := jobkit.CheckOwner(&v1alpha1.MachineOSBuild{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "u"}}); err != nil {
		t.Error(err)
	}
	if jobkit.CheckSecretName("push secret", "") != nil || jobkit.CheckSecretName("push secret", "push-creds") != nil {
		t.Error("CheckSecretName refused a valid name")
	}
	if err := jobkit.CheckSecretName("push secret", "Not_A_Name"); err == nil || !strings.Contains(err.Error(), "push secret") {
		t.Errorf("CheckSecretName: %v", err)
	}
	if errs := jobkit.CheckRegistries([]string{"127.0.0.1:5000", "", "r/x", "a,b"}); len(errs) != 3 {
		t.Errorf("CheckRegistries: %v, want three errors", errs)
	}
}
