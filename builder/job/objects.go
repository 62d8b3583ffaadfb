package job

import (
	"bytes"
	"compress/gzip"
	_ "embed" // the build script
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/jobkit"
	"github.com/strata-dev/strata/containerfile"
)

//go:embed build.sh
var buildScript string

// BuildScript is the script the build pod runs; its header documents the
// environment it reads and the report it writes.
func BuildScript() string { return buildScript }

// LabelMachineOSBuild is on the Job, the Secret and the build pods; its
// value is LabelValue(build name).
const LabelMachineOSBuild = "machineconfiguration.strata.dev/machineosbuild"

// LabelControlPlane marks control-plane nodes; build pods stay off them
// unless Placement.Affinity says otherwise.
const LabelControlPlane = jobkit.LabelControlPlane

// MaxContextBytes bounds the gzipped build context in the Secret, which
// must stay under 1 MiB together with the script and the step map.
const MaxContextBytes = 900 << 10

// DefaultActiveDeadlineSeconds is the Job's deadline when Config leaves it 0.
const DefaultActiveDeadlineSeconds = 3600

// Keys of the build Secret.
const (
	KeyContext = "context.tar.gz"
	KeySteps   = "steps"
	KeyScript  = "build.sh"
)

// Containers of the build pod, in the order they run: two init containers
// and the pod's only container.
const (
	// ContainerPull pulls the base image with the base image pull secret.
	ContainerPull = "pull"
	// ContainerBuild builds the image with no credentials; the admin's
	// RUN steps run here.
	ContainerBuild = "build"
	// ContainerPush pushes the image with the push secret and reports its
	// digest.
	ContainerPush = "push"
)

// Paths in the build pod.
const (
	// InputsDir holds the build Secret's files: all of them in the build
	// container, only the script in the others.
	InputsDir = "/var/run/strata/build"
	// StorageDir is buildah's image storage, shared by the pull and
	// build containers.
	StorageDir = "/var/lib/strata/storage"
	// LayoutDir is the OCI layout the build container writes and the
	// push container reads, the one thing they share.
	LayoutDir = "/var/lib/strata/layout"
	// ScratchDir is each container's own writable directory.
	ScratchDir    = "/var/lib/strata/scratch"
	BaseSecretDir = "/var/run/strata/secrets/base-pull"
	PushSecretDir = "/var/run/strata/secrets/push"
	AuthFileName  = jobkit.AuthFileName
	volInputs     = "inputs"
	volScript     = "script"
	volStorage    = "storage"
	volLayout     = "layout"
	volBaseSecret = "base-pull-secret"
	volPushSecret = "push-secret"
	jobNamePrefix = "build-"
)

// Exit codes of the build script. A build that failed for a reason that
// retrying cannot fix (a Containerfile instruction, refused credentials,
// undeliverable inputs) exits with ExitCodePermanent, and the Job's pod
// failure policy fails the Job at once instead of spending its retries.
const (
	ExitCodeFailed    = jobkit.ExitCodeFailed
	ExitCodePermanent = jobkit.ExitCodePermanent
)

// Placement of build pods, from the controller's configuration; the boot
// disk pods are placed the same way.
type Placement = jobkit.Placement

// Config is the Job builder's configuration, the same for every build.
type Config struct {
	// Namespace is where the Jobs, their Secrets and the registry Secrets
	// live ("strata-system").
	Namespace string
	// BuilderImage is the image with bash and buildah the build pod runs.
	BuilderImage string
	// Placement of the build pods.
	Placement Placement
	// BackoffLimit is how often a failed build pod is retried.
	BackoffLimit int32
	// ActiveDeadlineSeconds bounds a build; 0 means
	// DefaultActiveDeadlineSeconds.
	ActiveDeadlineSeconds int64
	// InsecureRegistries are the registries (host[:port]) reached without
	// TLS verification.
	InsecureRegistries []string
	// Arch is the nodes' architecture in Go's spelling (amd64, arm64,
	// ppc64le, s390x); "" is amd64. Build pods run on a node of it, and
	// buildah pulls and builds for it.
	Arch string
	// VolumeSizeLimits bound the build pod's emptyDirs; unset ones take
	// DefaultVolumeSizeLimits.
	VolumeSizeLimits VolumeSizeLimits
	// HostUsers is the build pods' hostUsers: false runs each in a user
	// namespace of its own, so that root in the pod is no user of the
	// node's. Nil leaves it unset (the node's user namespace), since a
	// runtime without user namespace support (containerd before 2.0)
	// cannot start such a pod at all; see the package comment for what
	// was measured.
	HostUsers *bool
}

// ArchLabel is the well-known node label of a node's architecture.
const ArchLabel = jobkit.ArchLabel

// Request is one build.
type Request struct {
	// Build owns the Job and its Secret; their names derive from its name.
	Build *v1alpha1.MachineOSBuild
	// Result is the rendered build: Containerfile and context files.
	Result *containerfile.Result
	// BaseImagePullSecret names a kubernetes.io/dockerconfigjson Secret in
	// Config.Namespace used to pull the base image; "" pulls anonymously.
	BaseImagePullSecret string
	// PushSecret names a kubernetes.io/dockerconfigjson Secret in
	// Config.Namespace used to push; "" pushes anonymously.
	PushSecret string
	// PushSpec is the registry/repository:tag the image is pushed to.
	PushSpec string
}

// JobName is the name of the Job (and its Secret) of a build: a DNS label
// of at most 63 characters, the same for the same build name, different
// for different ones. Long names, and names that are not DNS labels
// (MachineOSBuild names may contain dots), are shortened and suffixed
// with a hash of the whole name.
func JobName(build string) string {
	return jobkit.Name(jobNamePrefix, build)
}

// LabelValue is the value of LabelMachineOSBuild for a build: its name when
// that is a valid label value, else a shortened name with a hash suffix.
func LabelValue(build string) string {
	return jobkit.LabelValue(build)
}

// PodLabels selects the pods of a build's Job (they carry it from the
// Job's pod template).
func PodLabels(build string) map[string]string {
	return map[string]string{LabelMachineOSBuild: LabelValue(build)}
}

// Objects returns the Secret that carries the build's inputs and the Job
// that builds them. Both are named JobName(build), live in cfg.Namespace,
// carry LabelMachineOSBuild and a controller owner reference to the build.
// It fails when the request is incomplete, the Containerfile names no base
// image it can pull, or the gzipped context exceeds MaxContextBytes.
func Objects(cfg Config, req Request) (*corev1.Secret, *batchv1.Job, error) {
	if err := check(cfg, req); err != nil {
		return nil, nil, err
	}
	var ctx bytes.Buffer
	// Gzip's header has no name and a zero time, so the same build gives
	// the same Secret.
	zw, err := gzip.NewWriterLevel(&ctx, gzip.BestCompression)
	if err != nil {
		return nil, nil, err
	}
	if err := req.Result.WriteTar(zw); err != nil {
		return nil, nil, fmt.Errorf("write build context: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, nil, fmt.Errorf("compress build context: %w", err)
	}
	if ctx.Len() > MaxContextBytes {
		return nil, nil, fmt.Errorf("build context of MachineOSBuild %s is %d bytes gzipped, more than the %d a Secret can carry: shrink the files and Containerfile content of the configuration",
			req.Build.Name, ctx.Len(), MaxContextBytes)
	}
	steps, err := StepMap(req.Result.Containerfile)
	if err != nil {
		return nil, nil, fmt.Errorf("map Containerfile steps to lines: %w", err)
	}
	bases, err := BaseImages(req.Result.Containerfile)
	if err != nil {
		return nil, nil, err
	}

	name := JobName(req.Build.Name)
	labels := PodLabels(req.Build.Name)

	// A Secret, not a ConfigMap: the context carries the configuration's
	// /etc files, which may hold keys and passwords of the nodes' own.
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: jobkit.ObjectMeta(name, cfg.Namespace, labels, req.Build),
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			KeyScript:  []byte(buildScript),
			KeySteps:   []byte(steps),
			KeyContext: ctx.Bytes(),
		},
		Immutable: ptr.To(true),
	}

	job := jobkit.NewJob(podJob(cfg, req, name, labels, bases))
	return secret, job, nil
}

func check(cfg Config, req Request) error {
	var errs []error
	if cfg.Namespace == "" {
		errs = append(errs, errors.New("no namespace configured for build Jobs"))
	}
	if cfg.BuilderImage == "" {
		errs = append(errs, errors.New("no builder image configured"))
	}
	if cfg.BackoffLimit < 0 {
		errs = append(errs, fmt.Errorf("backoff limit %d is negative", cfg.BackoffLimit))
	}
	if err := jobkit.CheckOwner(req.Build); err != nil {
		errs = append(errs, err)
	}
	if req.Result == nil || len(req.Result.Containerfile) == 0 {
		errs = append(errs, errors.New("the request has no rendered Containerfile"))
	}
	if req.PushSpec == "" {
		errs = append(errs, errors.New("the request has no push spec"))
	}
	for _, s := range []struct{ what, name string }{{"base image pull secret", req.BaseImagePullSecret}, {"push secret", req.PushSecret}} {
		if err := jobkit.CheckSecretName(s.what, s.name); err != nil {
			errs = append(errs, err)
		}
	}
	if req.Result != nil {
		for k, v := range req.Result.Annotations {
			// One key=value a line in the script's environment.
			if k == "" || strings.ContainsAny(k, "=\n") || strings.Contains(v, "\n") {
				errs = append(errs, fmt.Errorf("annotation %q=%q cannot be passed to buildah: a key must be non-empty without = or a newline, a value without a newline", k, v))
			}
		}
	}
	if err := CheckResources(cfg); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, jobkit.CheckRegistries(cfg.InsecureRegistries)...)
	return errors.Join(errs...)
}

// podJob is the build's Job: its pod's three containers and their
// volumes.
func podJob(cfg Config, req Request, name string, labels map[string]string, bases []BaseImage) jobkit.Job {
	sizes := volumeSizeLimits(cfg)
	volumes := []corev1.Volume{
		jobkit.SecretVolume(volInputs, name),
		jobkit.SecretVolume(volScript, name, corev1.KeyToPath{Key: KeyScript, Path: KeyScript}),
		{Name: volStorage, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: sizes.Storage}}},
		{Name: volLayout, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: sizes.Layout}}},
	}
	// The pull and build containers share buildah's storage; the build
	// and push containers share only the OCI layout, which the push,
	// holding the push secret, checks and only reads.
	storage := []corev1.EnvVar{
		{Name: "STRATA_STORAGE", Value: StorageDir},
		{Name: "STRATA_STORAGE_DRIVER", Value: "vfs"},
		{Name: "STRATA_PLATFORM", Value: "linux/" + jobkit.Arch(cfg.Arch)},
	}
	storageMount := corev1.VolumeMount{Name: volStorage, MountPath: StorageDir}
	layout := corev1.EnvVar{Name: "STRATA_LAYOUT", Value: LayoutDir}
	resources := containerResources(cfg)
	container := func(phase, inputs string, sc *corev1.SecurityContext, env []corev1.EnvVar, mounts ...corev1.VolumeMount) corev1.Container {
		scratch := phase + "-scratch"
		volumes = append(volumes, corev1.Volume{Name: scratch, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: sizes.Scratch}}})
		c := jobkit.Container(phase, cfg.BuilderImage, sc)
		c.Command = []string{"/bin/bash", InputsDir + "/" + KeyScript, phase}
		c.Env = append([]corev1.EnvVar{
			{Name: "STRATA_SCRATCH", Value: ScratchDir},
			{Name: "STRATA_INSECURE_REGISTRIES", Value: strings.Join(cfg.InsecureRegistries, ",")},
			{Name: "STRATA_TERMINATION_LOG", Value: c.TerminationMessagePath},
		}, env...)
		c.VolumeMounts = append([]corev1.VolumeMount{
			{Name: inputs, MountPath: InputsDir, ReadOnly: true},
			{Name: scratch, MountPath: ScratchDir},
		}, mounts...)
		c.Resources = *resources.DeepCopy()
		return c
	}
	// registrySecret mounts a registry Secret's .dockerconfigjson as an
	// authfile, in the one container that uses it.
	registrySecret := func(secret, vol, dir, envName string) ([]corev1.EnvVar, []corev1.VolumeMount) {
		if secret == "" {
			return nil, nil
		}
		v, m, path := jobkit.AuthFile(secret, vol, dir)
		volumes = append(volumes, v)
		return []corev1.EnvVar{{Name: envName, Value: path}}, []corev1.VolumeMount{m}
	}

	var lines []string
	for _, b := range bases {
		lines = append(lines, fmt.Sprintf("%d %s", b.Line, b.Image))
	}
	pullEnv, pullMounts := registrySecret(req.BaseImagePullSecret, volBaseSecret, BaseSecretDir, "STRATA_BASE_AUTHFILE")
	pull := container(ContainerPull, volScript, buildahSecurityContext(),
		slices.Concat(storage, []corev1.EnvVar{{Name: "STRATA_BASE_IMAGES", Value: strings.Join(lines, "\n")}}, pullEnv),
		append([]corev1.VolumeMount{storageMount}, pullMounts...)...)
	buildEnv := slices.Concat(storage, []corev1.EnvVar{
		layout,
		{Name: "STRATA_CONTEXT_ARCHIVE", Value: InputsDir + "/" + KeyContext},
		{Name: "STRATA_STEPS", Value: InputsDir + "/" + KeySteps},
	})
	if a := req.Result.Annotations; len(a) > 0 {
		// Sorted: the same build gives the same Job.
		lines := make([]string, 0, len(a))
		for _, k := range slices.Sorted(maps.Keys(a)) {
			lines = append(lines, k+"="+a[k])
		}
		buildEnv = append(buildEnv, corev1.EnvVar{Name: "STRATA_ANNOTATIONS", Value: strings.Join(lines, "\n")})
	}
	build := container(ContainerBuild, volInputs, buildahSecurityContext(), buildEnv,
		storageMount, corev1.VolumeMount{Name: volLayout, MountPath: LayoutDir})
	pushEnv, pushMounts := registrySecret(req.PushSecret, volPushSecret, PushSecretDir, "STRATA_PUSH_AUTHFILE")
	push := container(ContainerPush, volScript, pushSecurityContext(),
		append([]corev1.EnvVar{layout, {Name: "STRATA_PUSH_SPEC", Value: req.PushSpec}}, pushEnv...),
		append([]corev1.VolumeMount{{Name: volLayout, MountPath: LayoutDir, ReadOnly: true}}, pushMounts...)...)

	return jobkit.Job{
		Name:                         name,
		Namespace:                    cfg.Namespace,
		Owner:                        req.Build,
		Labels:                       labels,
		BackoffLimit:                 cfg.BackoffLimit,
		ActiveDeadlineSeconds:        cfg.ActiveDeadlineSeconds,
		DefaultActiveDeadlineSeconds: DefaultActiveDeadlineSeconds,
		// No container named: a Containerfile instruction fails the build
		// container, an init container, for good.
		PermanentContainer: "",
		Placement:          cfg.Placement,
		Arch:               cfg.Arch,
		HostUsers:          cfg.HostUsers,
		// Init containers run one after the other, each after the one
		// before succeeded: the push starts only when the build, and
		// every process it left, has ended.
		InitContainers: []corev1.Container{pull, build},
		Containers:     []corev1.Container{push},
		Volumes:        volumes,
	}
}

// buildahSecurityContext is the pull and build containers': see the
// package comment for how it was measured. No container is privileged or
// may gain privileges, and each keeps its own file system read-only.
func buildahSecurityContext() *corev1.SecurityContext {
	// buildah, root without CAP_SYS_ADMIN, runs itself in a user
	// namespace it makes, which the runtime's default profile refuses:
	// "Error during unshare(CLONE_NEWUSER): Operation not permitted"
	// (containerd's default allows unshare, mount and setns only with
	// CAP_SYS_ADMIN).
	return jobkit.SecurityContext(buildahCapabilities, corev1.SeccompProfileTypeUnconfined)
}

// pushSecurityContext is the push container's, the one that holds the push
// secret: it runs skopeo alone, from an OCI layout to a registry, which
// needs no namespace, no mount and no capability, so it keeps the
// runtime's default seccomp profile and drops every capability.
func pushSecurityContext() *corev1.SecurityContext {
	return jobkit.SecurityContext(nil, corev1.SeccompProfileTypeRuntimeDefault)
}

// buildahCapabilities are all the pull and build containers keep: what
// buildah needs to map the whole ID range into the user namespace it makes
// (uid_map and gid_map, 0 included).
var buildahCapabilities = []corev1.Capability{"SETUID", "SETGID", "SETFCAP"}
