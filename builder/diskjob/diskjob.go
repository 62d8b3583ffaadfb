package diskjob

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/builder/jobkit"
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
	return jobkit.Name("bootdisk-", build)
}

// PodLabels select a build's disk pods.
func PodLabels(build string) map[string]string {
	return map[string]string{LabelBootDisk: jobkit.LabelValue(build)}
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
		v, m, path := jobkit.AuthFile(req.PushSecret, "push-secret", PushSecretDir)
		volumes, mounts = append(volumes, v), append(mounts, m)
		args = append(args, "--auth-file="+path)
	}
	storage := work.DeepCopy()
	storage.Add(resource.MustParse("1Gi"))
	c := jobkit.Container(Container, cfg.Image, jobkit.SecurityContext(Capabilities, corev1.SeccompProfileTypeRuntimeDefault))
	c.SecurityContext.RunAsUser = ptr.To(int64(0))
	c.Command, c.Args = []string{Binary}, args
	c.Env = []corev1.EnvVar{{Name: "TMPDIR", Value: WorkDir}}
	c.VolumeMounts = mounts
	c.Resources = corev1.ResourceRequirements{
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
	return jobkit.NewJob(jobkit.Job{
		Name:                         JobName(req.Build.Name),
		Namespace:                    cfg.Namespace,
		Owner:                        req.Build,
		Labels:                       PodLabels(req.Build.Name),
		BackoffLimit:                 cfg.BackoffLimit,
		ActiveDeadlineSeconds:        cfg.ActiveDeadlineSeconds,
		DefaultActiveDeadlineSeconds: DefaultActiveDeadlineSeconds,
		PermanentContainer:           Container,
		Placement:                    cfg.Placement,
		Arch:                         cfg.Arch,
		HostUsers:                    cfg.HostUsers,
		Containers:                   []corev1.Container{c},
		Volumes:                      volumes,
	}), nil
}

func check(cfg Config, req Request) error {
	var errs []error
	if cfg.Namespace == "" {
		errs = append(errs, errors.New("no namespace configured for boot disk Jobs"))
	}
	if cfg.Image == "" {
		errs = append(errs, errors.New("no boot disk image configured"))
	}
	if err := jobkit.CheckOwner(req.Build); err != nil {
		errs = append(errs, err)
	}
	if !strings.Contains(req.Image, "@sha256:") {
		errs = append(errs, fmt.Errorf("image %q is not by digest", req.Image))
	}
	if req.SizeMiB < v1alpha1.MinBootDiskSizeMiB || req.SizeMiB > v1alpha1.MaxBootDiskSizeMiB {
		errs = append(errs, fmt.Errorf("size %d MiB is not between %d and %d", req.SizeMiB, v1alpha1.MinBootDiskSizeMiB, v1alpha1.MaxBootDiskSizeMiB))
	}
	if err := jobkit.CheckSecretName("push secret", req.PushSecret); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, jobkit.CheckRegistries(cfg.InsecureRegistries)...)
	return errors.Join(errs...)
}

// Status is a disk Job's state: job.Status (phase, failure, start time,
// whether to stop the Job, when to look again), and the Report of the
// pod that succeeded.
type Status struct {
	job.Status
	Report *Report
}

// Interpret derives a disk's status from its Job and the Job's pods, as
// jobkit.Follow reads every Job of the builder: a pod that succeeded with
// a Report naming an artifact is a published disk; everything else
// (pending, running, failures, deadlines, images that cannot be pulled)
// reads as a build Job's does.
func Interpret(jb *batchv1.Job, pods []corev1.Pod) Status {
	var report *Report
	st := jobkit.Follow(jb, pods, jobkit.Success{
		Container: Container,
		Read: func(pod *corev1.Pod, msg string) *v1alpha1.BuildFailure {
			var r Report
			if json.Unmarshal([]byte(msg), &r) == nil && validArtifact(r.Artifact) && r.Size > 0 && imageref.ValidDigest(r.RawDigest) {
				report = &r
				return nil
			}
			return &v1alpha1.BuildFailure{
				Step:    v1alpha1.BuildStepUnknown,
				Message: fmt.Sprintf("boot disk pod %s succeeded but did not report the published artifact in its termination message", pod.Name),
				LogTail: msg,
			}
		},
		Missing: "no succeeded pod reports the published artifact",
	})
	return Status{Status: st, Report: report}
}

func validArtifact(a string) bool {
	_, d, ok := strings.Cut(a, "@")
	return ok && imageref.ValidDigest(d)
}
