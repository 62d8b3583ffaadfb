package diskjob

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/imageref"
)

// Container is the pod's one container.
const Container = "disk"

// LabelBootDisk is on the Job and its pod; its value is
// job.LabelValue(build name). The build Job's pods carry
// job.LabelMachineOSBuild instead, so neither Job's pods are taken for
// the other's.
const LabelBootDisk = v1alpha1.Prefix + "bootdisk"

// Paths in the pod.
const (
	// Binary is strata-bootdisk in the boot disk image.
	Binary = "/usr/local/bin/strata-bootdisk"
	// WorkDir holds the disk, its sysroot while it is made, and its
	// compressed copy.
	WorkDir = "/var/lib/strata/bootdisk"
	// PushSecretDir holds the push secret's auth.json.
	PushSecretDir = "/var/run/strata/secrets/push"
)

// DefaultActiveDeadlineSeconds bounds a disk Job when Config leaves it 0:
// pulling a base of a few GiB, committing and deploying it, writing and
// compressing the file system.
const DefaultActiveDeadlineSeconds = 3600

// Capabilities are all the container keeps (see the package comment).
var Capabilities = []corev1.Capability{"CHOWN", "DAC_READ_SEARCH", "FOWNER", "FSETID", "SETFCAP"}

// Config is the boot disk Job's configuration, the same for every disk.
type Config struct {
	// Namespace of the Jobs and the push secrets.
	Namespace string
	// Image is the boot disk image: Debian with ostree and e2fsprogs,
	// and strata-bootdisk at Binary.
	Image string
	// Placement of the pods, as the build pods'.
	Placement job.Placement
	// BackoffLimit is how often a failed pod is retried.
	BackoffLimit int32
	// ActiveDeadlineSeconds bounds a disk Job; 0 is
	// DefaultActiveDeadlineSeconds.
	ActiveDeadlineSeconds int64
	// InsecureRegistries are reached over plain HTTP.
	InsecureRegistries []string
	// Arch is the nodes' architecture in Go's spelling; "" is amd64.
	Arch string
	// HostUsers is the pods' hostUsers; nil leaves it unset.
	HostUsers *bool
}

// Request is one disk.
type Request struct {
	// Build owns the Job; the Job's name derives from its name.
	Build *v1alpha1.MachineOSBuild
	// Image is the built image, repository@sha256:….
	Image string
	// SizeMiB is the raw disk's size.
	SizeMiB int32
	// PushSecret names the kubernetes.io/dockerconfigjson Secret that
	// reads the image and writes the artifact; "" is anonymous.
	PushSecret string
}

// Report is what strata-bootdisk writes to its termination message.
type Report struct {
	// Artifact is the published artifact, repository@sha256:…, on
	// success.
	Artifact string `json:"artifact,omitempty"`
	// Size, RawDigest and CompressedSize describe the disk, on success.
	Size           int64  `json:"size,omitempty"`
	RawDigest      string `json:"rawDigest,omitempty"`
	CompressedSize int64  `json:"compressedSize,omitempty"`
	// Step, Message and LogTail say what failed (job.TerminationMessage).
	Step    v1alpha1.BuildStep `json:"step,omitempty"`
	Message string             `json:"message,omitempty"`
	LogTail string             `json:"logTail,omitempty"`
}

// JobName is the Job of a build's disk: bootdisk-<build>, shortened with
// a hash of the build's name when that is no DNS label of 63 characters.
func JobName(build string) string {
	const prefix = "bootdisk-"
	name := prefix + build
	if len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(build))
	suffix := hex.EncodeToString(sum[:])[:10]
	var b strings.Builder
	for _, r := range strings.ToLower(build) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	head := strings.Trim(b.String(), "-")
	if n := validation.DNS1123LabelMaxLength - len(prefix) - 1 - len(suffix); len(head) > n {
		head = strings.Trim(head[:n], "-")
	}
	if head == "" {
		return prefix + suffix
	}
	return prefix + head + "-" + suffix
}

// PodLabels select a build's disk pods.
func PodLabels(build string) map[string]string {
	return map[string]string{LabelBootDisk: job.LabelValue(build)}
}

// WorkLimit bounds the work directory of a disk of sizeMiB: the sysroot
// (about the image unpacked, bounded by the disk's size), the disk file
// (sparse, at most its size) and its compressed copy, and room for the
// image's layers while they are read.
func WorkLimit(sizeMiB int32) resource.Quantity {
	return *resource.NewQuantity(3*int64(sizeMiB)<<20+(1<<30), resource.BinarySI)
}

// Objects returns the Job that makes and publishes req's disk, named
// JobName(build) in cfg.Namespace, with a controller owner reference to
// the build.
func Objects(cfg Config, req Request) (*batchv1.Job, error) {
	if err := check(cfg, req); err != nil {
		return nil, err
	}
	name := JobName(req.Build.Name)
	labels := PodLabels(req.Build.Name)
	deadline := cfg.ActiveDeadlineSeconds
	if deadline <= 0 {
		deadline = DefaultActiveDeadlineSeconds
	}
	args := []string{
		"--image=" + req.Image,
		"--size-mib=" + strconv.Itoa(int(req.SizeMiB)),
		"--work-dir=" + WorkDir,
		"--termination-log=" + corev1.TerminationMessagePathDefault,
	}
	for _, r := range cfg.InsecureRegistries {
		args = append(args, "--insecure-registry="+r)
	}
	work := WorkLimit(req.SizeMiB)
	volumes := []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &work}}}}
	mounts := []corev1.VolumeMount{{Name: "work", MountPath: WorkDir}}
	if req.PushSecret != "" {
		volumes = append(volumes, corev1.Volume{Name: "push-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  req.PushSecret,
			Items:       []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: job.AuthFileName}},
			DefaultMode: ptr.To(int32(0o400)),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "push-secret", MountPath: PushSecretDir, ReadOnly: true})
		args = append(args, "--auth-file="+PushSecretDir+"/"+job.AuthFileName)
	}
	storage := work.DeepCopy()
	storage.Add(resource.MustParse("1Gi"))
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("500m"),
			corev1.ResourceMemory:           resource.MustParse("512Mi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("2"),
			corev1.ResourceMemory:           resource.MustParse("2Gi"),
			corev1.ResourceEphemeralStorage: storage,
		},
	}
	p := cfg.Placement
	spec := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr.To(int64(5)),
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		HostUsers:                     cfg.HostUsers,
		HostNetwork:                   p.HostNetwork,
		NodeSelector:                  nodeSelector(cfg),
		Tolerations:                   append([]corev1.Toleration(nil), p.Tolerations...),
		Affinity:                      affinity(p.Affinity),
		Containers: []corev1.Container{{
			Name:                     Container,
			Image:                    cfg.Image,
			ImagePullPolicy:          corev1.PullIfNotPresent,
			Command:                  []string{Binary},
			Args:                     args,
			Env:                      []corev1.EnvVar{{Name: "TMPDIR", Value: WorkDir}},
			VolumeMounts:             mounts,
			Resources:                resources,
			TerminationMessagePath:   corev1.TerminationMessagePathDefault,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext: &corev1.SecurityContext{
				RunAsUser:                ptr.To(int64(0)),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: append([]corev1.Capability(nil), Capabilities...)},
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		}},
		Volumes: volumes,
	}
	if p.HostNetwork {
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	owner := metav1.NewControllerRef(req.Build, v1alpha1.GroupVersion.WithKind("MachineOSBuild"))
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       cfg.Namespace,
			Labels:          copyMap(labels),
			OwnerReferences: []metav1.OwnerReference{*owner},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(cfg.BackoffLimit),
			ActiveDeadlineSeconds: ptr.To(deadline),
			Completions:           ptr.To(int32(1)),
			Parallelism:           ptr.To(int32(1)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{
					// An image that does not fit, or credentials the
					// registry refuses, fail the same way again.
					Action: batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
						ContainerName: ptr.To(Container),
						Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
						Values:        []int32{job.ExitCodePermanent},
					},
				},
				{
					Action: batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
						{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
					},
				},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: copyMap(labels)},
				Spec:       spec,
			},
		},
	}, nil
}

func check(cfg Config, req Request) error {
	var errs []error
	if cfg.Namespace == "" {
		errs = append(errs, errors.New("no namespace configured for boot disk Jobs"))
	}
	if cfg.Image == "" {
		errs = append(errs, errors.New("no boot disk image configured"))
	}
	if req.Build == nil || req.Build.Name == "" || req.Build.UID == "" {
		errs = append(errs, errors.New("the request needs a MachineOSBuild with a name and a UID"))
	}
	if !strings.Contains(req.Image, "@sha256:") {
		errs = append(errs, fmt.Errorf("image %q is not by digest", req.Image))
	}
	if req.SizeMiB < v1alpha1.MinBootDiskSizeMiB || req.SizeMiB > v1alpha1.MaxBootDiskSizeMiB {
		errs = append(errs, fmt.Errorf("size %d MiB is not between %d and %d", req.SizeMiB, v1alpha1.MinBootDiskSizeMiB, v1alpha1.MaxBootDiskSizeMiB))
	}
	if s := req.PushSecret; s != "" && len(validation.IsDNS1123Subdomain(s)) > 0 {
		errs = append(errs, fmt.Errorf("push secret name %q is not a valid Secret name", s))
	}
	for _, r := range cfg.InsecureRegistries {
		if r == "" || strings.ContainsAny(r, "/\" \t\n,") {
			errs = append(errs, fmt.Errorf("insecure registry %q is not a host[:port]", r))
		}
	}
	return errors.Join(errs...)
}

func nodeSelector(cfg Config) map[string]string {
	sel := copyMap(cfg.Placement.NodeSelector)
	if sel == nil {
		sel = map[string]string{}
	}
	if _, ok := sel[job.ArchLabel]; !ok {
		arch := cfg.Arch
		if arch == "" {
			arch = "amd64"
		}
		sel[job.ArchLabel] = arch
	}
	return sel
}

// affinity keeps disk pods off control-plane nodes, as build pods, unless
// the placement has a node affinity of its own.
func affinity(a *corev1.Affinity) *corev1.Affinity {
	out := a.DeepCopy()
	if out == nil {
		out = &corev1.Affinity{}
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: job.LabelControlPlane, Operator: corev1.NodeSelectorOpDoesNotExist}},
			}}},
		}
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Status is a disk Job's state: job.Status (phase, failure, start time,
// whether to stop the Job, when to look again), and the Report of the
// pod that succeeded.
type Status struct {
	job.Status
	Report *Report
}

// Interpret derives a disk's status from its Job and the Job's pods. A
// pod that succeeded with a Report naming an artifact is a published
// disk; everything else (pending, running, failures, deadlines, images
// that cannot be pulled) reads as a build Job's does (job.Interpret).
func Interpret(jb *batchv1.Job, pods []corev1.Pod) Status {
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodSucceeded {
			continue
		}
		st := Status{Status: job.Status{StartTime: jb.Status.StartTime}}
		msg := terminationMessage(p)
		var r Report
		if json.Unmarshal([]byte(msg), &r) == nil && validArtifact(r.Artifact) && r.Size > 0 && imageref.ValidDigest(r.RawDigest) {
			st.Phase, st.Report = job.PhaseSucceeded, &r
			return st
		}
		st.Phase = job.PhaseFailed
		st.Failure = job.BoundFailure(&v1alpha1.BuildFailure{
			Step:    v1alpha1.BuildStepUnknown,
			Message: fmt.Sprintf("boot disk pod %s succeeded but did not report the published artifact in its termination message", p.Name),
			LogTail: msg,
		})
		return st
	}
	if jb != nil {
		if c := condition(jb, batchv1.JobComplete); c != nil {
			return Status{Status: job.Status{Phase: job.PhaseFailed, StartTime: jb.Status.StartTime, Failure: &v1alpha1.BuildFailure{
				Step:    v1alpha1.BuildStepUnknown,
				Message: fmt.Sprintf("Job %s completed but no succeeded pod reports the published artifact", jb.Name),
			}}}
		}
	}
	return Status{Status: job.Interpret(jb, pods)}
}

func validArtifact(a string) bool {
	_, d, ok := strings.Cut(a, "@")
	return ok && imageref.ValidDigest(d)
}

func terminationMessage(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == Container && cs.State.Terminated != nil {
			return cs.State.Terminated.Message
		}
	}
	return ""
}

func condition(jb *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range jb.Status.Conditions {
		if c := &jb.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}
