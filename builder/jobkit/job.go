package jobkit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// LabelControlPlane marks control-plane nodes; the pods stay off them
// unless Placement.Affinity says otherwise.
const LabelControlPlane = "node-role.kubernetes.io/control-plane"

// ArchLabel is the well-known node label of a node's architecture.
const ArchLabel = "kubernetes.io/arch"

// Exit codes of the programs the pods run. One that failed for a reason
// retrying cannot fix exits with ExitCodePermanent, and the Job's pod
// failure policy fails the Job at once instead of spending its retries.
const (
	ExitCodeFailed    = 1
	ExitCodePermanent = 3
)

// AuthFileName is the name a registry Secret's .dockerconfigjson is
// mounted under (AuthFile).
const AuthFileName = "auth.json"

const (
	secretFileMode = int32(0o400)
	hashSuffixLen  = 10
)

// Placement of the pods, from the controller's configuration: build and
// boot disk pods are placed alike (the test cluster needs HostNetwork so
// the pods reach the registry on 127.0.0.1).
type Placement struct {
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity of the pods. Without a nodeAffinity here, the pods get a
	// required node affinity that keeps them off control-plane nodes
	// (LabelControlPlane DoesNotExist); a nodeAffinity here replaces it,
	// and an empty one (nodeAffinity: {}) allows every node.
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Resources of each of the build pod's containers (they run one after
	// the other): what is unset takes builder/job's DefaultResources, and
	// the ephemeral-storage limit, unless set, holds every volume of the
	// pod. The boot disk pod sizes itself from its disk.
	Resources   corev1.ResourceRequirements `json:"resources,omitempty"`
	HostNetwork bool                        `json:"hostNetwork,omitempty"`
}

// Job is what one of the builder's Jobs has of its own; NewJob makes the
// rest.
type Job struct {
	// Name and Namespace of the Job.
	Name, Namespace string
	// Owner is the build the Job belongs to, its controller.
	Owner *v1alpha1.MachineOSBuild
	// Labels are on the Job and its pods, and select the pods.
	Labels map[string]string
	// BackoffLimit is how often a failed pod is retried.
	BackoffLimit int32
	// ActiveDeadlineSeconds bounds the Job as configured; 0 or less is
	// DefaultActiveDeadlineSeconds.
	ActiveDeadlineSeconds, DefaultActiveDeadlineSeconds int64
	// PermanentContainer is the one container whose ExitCodePermanent
	// fails the Job at once; "" is any container, init containers too.
	PermanentContainer string
	// Placement, Arch ("" is amd64) and HostUsers (nil leaves it unset)
	// of the pod.
	Placement Placement
	Arch      string
	HostUsers *bool
	// InitContainers, Containers and Volumes of the pod.
	InitContainers, Containers []corev1.Container
	Volumes                    []corev1.Volume
}

// NewJob returns the Job j describes, named j.Name in j.Namespace, with
// j.Labels and a controller owner reference to j.Owner on it and on its
// pod template.
func NewJob(j Job) *batchv1.Job {
	deadline := j.ActiveDeadlineSeconds
	if deadline <= 0 {
		deadline = j.DefaultActiveDeadlineSeconds
	}
	var permanentIn *string
	if j.PermanentContainer != "" {
		permanentIn = ptr.To(j.PermanentContainer)
	}
	p := j.Placement
	spec := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		// The build script is each build container's PID 1 and installs
		// no SIGTERM handler, so the kernel drops the kubelet's SIGTERM: a
		// stopped pod (deadline, interruption) waits out the grace period
		// for SIGKILL. Nothing in either pod needs a clean shutdown.
		TerminationGracePeriodSeconds: ptr.To(int64(5)),
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		HostUsers:                     copyBool(j.HostUsers),
		HostNetwork:                   p.HostNetwork,
		NodeSelector:                  nodeSelector(p.NodeSelector, j.Arch),
		Tolerations:                   append([]corev1.Toleration(nil), p.Tolerations...),
		Affinity:                      affinity(p.Affinity),
		InitContainers:                j.InitContainers,
		Containers:                    j.Containers,
		Volumes:                       j.Volumes,
	}
	if p.HostNetwork {
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: ObjectMeta(j.Name, j.Namespace, j.Labels, j.Owner),
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(j.BackoffLimit),
			ActiveDeadlineSeconds: ptr.To(deadline),
			Completions:           ptr.To(int32(1)),
			Parallelism:           ptr.To(int32(1)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{
					// What failed for good (a Containerfile instruction,
					// refused credentials, an image that does not fit the
					// disk) fails the same way again: retrying only
					// delays the report.
					Action: batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
						ContainerName: permanentIn,
						Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
						Values:        []int32{ExitCodePermanent},
					},
				},
				{
					// A pod evicted or preempted did not fail the Job.
					Action: batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
						{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
					},
				},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(j.Labels)},
				Spec:       spec,
			},
		},
	}
}

// ObjectMeta is the metadata of an object of a build's Job (the Job, the
// build's Secret): its name, namespace and labels, and a controller owner
// reference to the build.
func ObjectMeta(name, namespace string, labels map[string]string, owner *v1alpha1.MachineOSBuild) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       namespace,
		Labels:          maps.Clone(labels),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, v1alpha1.GroupVersion.WithKind("MachineOSBuild"))},
	}
}

// Container is a container of image that reports in its termination
// message, with the log's tail in its place when it could not write one.
func Container(name, image string, sc *corev1.SecurityContext) corev1.Container {
	return corev1.Container{
		Name:                     name,
		Image:                    image,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          sc,
	}
}

// SecurityContext is a container's that keeps only the capabilities caps,
// may not gain privileges and cannot write its own file system, under the
// seccomp profile of type seccomp.
func SecurityContext(caps []corev1.Capability, seccomp corev1.SeccompProfileType) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: slices.Clone(caps)},
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		SeccompProfile:           &corev1.SeccompProfile{Type: seccomp},
	}
}

// SecretVolume is a volume named volume of the Secret secret (of its
// items, when given), its files readable by their owner only.
func SecretVolume(volume, secret string, items ...corev1.KeyToPath) corev1.Volume {
	return corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  secret,
		Items:       items,
		DefaultMode: ptr.To(secretFileMode),
	}}}
}

// AuthFile mounts a kubernetes.io/dockerconfigjson Secret's
// .dockerconfigjson as dir/AuthFileName, read-only, in a volume named
// volume: it returns the volume, its mount and the authfile's path, which
// is all the program using it is given.
func AuthFile(secret, volume, dir string) (corev1.Volume, corev1.VolumeMount, string) {
	return SecretVolume(volume, secret, corev1.KeyToPath{Key: corev1.DockerConfigJsonKey, Path: AuthFileName}),
		corev1.VolumeMount{Name: volume, MountPath: dir, ReadOnly: true},
		dir + "/" + AuthFileName
}

// Name is the name of a build's Job (and of its other objects): prefix
// and the build's name, when that is a DNS label of 63 characters at
// most. Else (too long, or with dots, which a MachineOSBuild name may
// have) it is shortened and suffixed with a hash of the build's name: the
// same for the same build, different for different ones.
func Name(prefix, build string) string {
	return shorten(prefix+build, build, true)
}

// LabelValue is the value of the label that selects a build's pods: the
// build's name when that is a valid label value, else a shortened name
// with a hash suffix.
func LabelValue(build string) string {
	return shorten(build, build, false)
}

// shorten returns s if it is valid (a DNS label, or a label value), else
// a valid prefix of it with a hash of key.
func shorten(s, key string, dnsLabel bool) string {
	valid := func(v string) bool {
		if dnsLabel {
			return len(validation.IsDNS1123Label(v)) == 0
		}
		return len(validation.IsValidLabelValue(v)) == 0
	}
	if valid(s) {
		return s
	}
	sum := sha256.Sum256([]byte(key))
	suffix := hex.EncodeToString(sum[:])[:hashSuffixLen]
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	head := b.String()
	if n := validation.DNS1123LabelMaxLength - 1 - hashSuffixLen; len(head) > n {
		head = head[:n]
	}
	head = strings.Trim(head, "-")
	if head == "" {
		return "b" + suffix
	}
	return head + "-" + suffix
}

// Arch is the pods' architecture in Go's spelling: arch, amd64 when "".
func Arch(arch string) string {
	if arch == "" {
		return "amd64"
	}
	return arch
}

// CheckOwner says whether a Job can be owned by build.
func CheckOwner(build *v1alpha1.MachineOSBuild) error {
	if build == nil || build.Name == "" || build.UID == "" {
		return errors.New("the request needs a MachineOSBuild with a name and a UID")
	}
	return nil
}

// CheckSecretName says whether name, of the Secret what, is a Secret's
// name; "" is none, and valid.
func CheckSecretName(what, name string) error {
	if name != "" && len(validation.IsDNS1123Subdomain(name)) > 0 {
		return fmt.Errorf("%s name %q is not a valid Secret name", what, name)
	}
	return nil
}

// CheckRegistries says which of the insecure registries are no
// host[:port]: a pod is given them as one comma-separated list.
func CheckRegistries(insecure []string) []error {
	var errs []error
	for _, r := range insecure {
		if r == "" || strings.ContainsAny(r, "/\" \t\n,") {
			errs = append(errs, fmt.Errorf("insecure registry %q is not a host[:port]", r))
		}
	}
	return errs
}

// nodeSelector is the placement's node selector plus the architecture:
// the pods run the image's programs (a build's RUN steps, a disk's
// deployment), which only a node of its architecture can run. A selector
// that names an architecture itself is kept.
func nodeSelector(sel map[string]string, arch string) map[string]string {
	out := maps.Clone(sel)
	if out == nil {
		out = map[string]string{}
	}
	if _, ok := out[ArchLabel]; !ok {
		out[ArchLabel] = Arch(arch)
	}
	return out
}

// affinity is the placement's affinity with the default node affinity,
// which keeps the pods off control-plane nodes, when it has none.
func affinity(a *corev1.Affinity) *corev1.Affinity {
	out := a.DeepCopy()
	if out == nil {
		out = &corev1.Affinity{}
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: LabelControlPlane, Operator: corev1.NodeSelectorOpDoesNotExist}},
			}}},
		}
	}
	return out
}

func copyBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	return ptr.To(*b)
}
