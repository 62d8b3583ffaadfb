package job

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed" // the build script
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
const LabelControlPlane = "node-role.kubernetes.io/control-plane"

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
	ScratchDir     = "/var/lib/strata/scratch"
	BaseSecretDir  = "/var/run/strata/secrets/base-pull"
	PushSecretDir  = "/var/run/strata/secrets/push"
	AuthFileName   = "auth.json"
	volInputs      = "inputs"
	volScript      = "script"
	volStorage     = "storage"
	volLayout      = "layout"
	volBaseSecret  = "base-pull-secret"
	volPushSecret  = "push-secret"
	jobNamePrefix  = "build-"
	maxNameLen     = validation.DNS1123LabelMaxLength
	hashSuffixLen  = 10
	dockerCfgJSON  = corev1.DockerConfigJsonKey
	secretFileMode = int32(0o400)
)

// Exit codes of the build script. A build that failed for a reason that
// retrying cannot fix (a Containerfile instruction, refused credentials,
// undeliverable inputs) exits with ExitCodePermanent, and the Job's pod
// failure policy fails the Job at once instead of spending its retries.
const (
	ExitCodeFailed    = 1
	ExitCodePermanent = 3
)

// Placement of build pods, from the controller's configuration (the test
// cluster needs HostNetwork so the pod reaches the registry on 127.0.0.1).
type Placement struct {
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity of the build pods. Without a nodeAffinity here, build pods
	// get a required node affinity that keeps them off control-plane
	// nodes (LabelControlPlane DoesNotExist); a nodeAffinity here replaces
	// it, and an empty one (nodeAffinity: {}) allows every node.
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Resources of each of the build pod's containers (they run one after
	// the other): what is unset takes DefaultResources, and the
	// ephemeral-storage limit, unless set, holds every volume of the pod.
	Resources   corev1.ResourceRequirements `json:"resources,omitempty"`
	HostNetwork bool                        `json:"hostNetwork,omitempty"`
}

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
const ArchLabel = "kubernetes.io/arch"

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
	return shorten(jobNamePrefix+build, build, true)
}

// LabelValue is the value of LabelMachineOSBuild for a build: its name when
// that is a valid label value, else a shortened name with a hash suffix.
func LabelValue(build string) string {
	return shorten(build, build, false)
}

// PodLabels selects the pods of a build's Job (they carry it from the
// Job's pod template).
func PodLabels(build string) map[string]string {
	return map[string]string{LabelMachineOSBuild: LabelValue(build)}
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
	if n := maxNameLen - 1 - hashSuffixLen; len(head) > n {
		head = head[:n]
	}
	head = strings.Trim(head, "-")
	if head == "" {
		return "b" + suffix
	}
	return head + "-" + suffix
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
	labels := map[string]string{LabelMachineOSBuild: LabelValue(req.Build.Name)}
	owner := metav1.NewControllerRef(req.Build, v1alpha1.GroupVersion.WithKind("MachineOSBuild"))
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name:            name,
			Namespace:       cfg.Namespace,
			Labels:          copyMap(labels),
			OwnerReferences: []metav1.OwnerReference{*owner.DeepCopy()},
		}
	}

	// A Secret, not a ConfigMap: the context carries the configuration's
	// /etc files, which may hold keys and passwords of the nodes' own.
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta(),
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			KeyScript:  []byte(buildScript),
			KeySteps:   []byte(steps),
			KeyContext: ctx.Bytes(),
		},
		Immutable: ptr.To(true),
	}

	deadline := cfg.ActiveDeadlineSeconds
	if deadline <= 0 {
		deadline = DefaultActiveDeadlineSeconds
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta(),
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(cfg.BackoffLimit),
			ActiveDeadlineSeconds: ptr.To(deadline),
			Completions:           ptr.To(int32(1)),
			Parallelism:           ptr.To(int32(1)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{
					// Retrying a build that failed for good only delays
					// the report. No container name: the rule holds for
					// the init containers too.
					Action: batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
						Operator: batchv1.PodFailurePolicyOnExitCodesOpIn,
						Values:   []int32{ExitCodePermanent},
					},
				},
				{
					// A pod evicted or preempted did not fail the build.
					Action: batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
						{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
					},
				},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: copyMap(labels)},
				Spec:       podSpec(cfg, req, name, bases),
			},
		},
	}
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
	if req.Build == nil || req.Build.Name == "" || req.Build.UID == "" {
		errs = append(errs, errors.New("the request needs a MachineOSBuild with a name and a UID"))
	}
	if req.Result == nil || len(req.Result.Containerfile) == 0 {
		errs = append(errs, errors.New("the request has no rendered Containerfile"))
	}
	if req.PushSpec == "" {
		errs = append(errs, errors.New("the request has no push spec"))
	}
	for _, s := range []struct{ what, name string }{{"base image pull secret", req.BaseImagePullSecret}, {"push secret", req.PushSecret}} {
		if s.name != "" && len(validation.IsDNS1123Subdomain(s.name)) > 0 {
			errs = append(errs, fmt.Errorf("%s name %q is not a valid Secret name", s.what, s.name))
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
	for _, r := range cfg.InsecureRegistries {
		if r == "" || strings.ContainsAny(r, "/\" \t\n,") {
			errs = append(errs, fmt.Errorf("insecure registry %q is not a host[:port]", r))
		}
	}
	return errors.Join(errs...)
}

func podSpec(cfg Config, req Request, name string, bases []BaseImage) corev1.PodSpec {
	p := cfg.Placement
	sizes := volumeSizeLimits(cfg)
	volumes := []corev1.Volume{
		{Name: volInputs, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  name,
			DefaultMode: ptr.To(secretFileMode),
		}}},
		{Name: volScript, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  name,
			Items:       []corev1.KeyToPath{{Key: KeyScript, Path: KeyScript}},
			DefaultMode: ptr.To(secretFileMode),
		}}},
		{Name: volStorage, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: sizes.Storage}}},
		{Name: volLayout, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: sizes.Layout}}},
	}
	// The pull and build containers share buildah's storage; the build
	// and push containers share only the OCI layout, which the push,
	// holding the push secret, checks and only reads.
	storage := []corev1.EnvVar{
		{Name: "STRATA_STORAGE", Value: StorageDir},
		{Name: "STRATA_STORAGE_DRIVER", Value: "vfs"},
		{Name: "STRATA_PLATFORM", Value: "linux/" + arch(cfg)},
	}
	storageMount := corev1.VolumeMount{Name: volStorage, MountPath: StorageDir}
	layout := corev1.EnvVar{Name: "STRATA_LAYOUT", Value: LayoutDir}
	resources := containerResources(cfg)
	container := func(phase, inputs string, sc *corev1.SecurityContext, env []corev1.EnvVar, mounts ...corev1.VolumeMount) corev1.Container {
		scratch := phase + "-scratch"
		volumes = append(volumes, corev1.Volume{Name: scratch, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: sizes.Scratch}}})
		return corev1.Container{
			Name:            phase,
			Image:           cfg.BuilderImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{"/bin/bash", InputsDir + "/" + KeyScript, phase},
			Env: append([]corev1.EnvVar{
				{Name: "STRATA_SCRATCH", Value: ScratchDir},
				{Name: "STRATA_INSECURE_REGISTRIES", Value: strings.Join(cfg.InsecureRegistries, ",")},
				{Name: "STRATA_TERMINATION_LOG", Value: corev1.TerminationMessagePathDefault},
			}, env...),
			VolumeMounts: append([]corev1.VolumeMount{
				{Name: inputs, MountPath: InputsDir, ReadOnly: true},
				{Name: scratch, MountPath: ScratchDir},
			}, mounts...),
			Resources:                *resources.DeepCopy(),
			TerminationMessagePath:   corev1.TerminationMessagePathDefault,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext:          sc,
		}
	}
	// registrySecret mounts a registry Secret's .dockerconfigjson as an
	// authfile, in the one container that uses it.
	registrySecret := func(secret, vol, dir, envName string) ([]corev1.EnvVar, []corev1.VolumeMount) {
		if secret == "" {
			return nil, nil
		}
		volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  secret,
			Items:       []corev1.KeyToPath{{Key: dockerCfgJSON, Path: AuthFileName}},
			DefaultMode: ptr.To(secretFileMode),
		}}})
		return []corev1.EnvVar{{Name: envName, Value: dir + "/" + AuthFileName}},
			[]corev1.VolumeMount{{Name: vol, MountPath: dir, ReadOnly: true}}
	}

	var lines []string
	for _, b := range bases {
		lines = append(lines, fmt.Sprintf("%d %s", b.Line, b.Image))
	}
	pullEnv, pullMounts := registrySecret(req.BaseImagePullSecret, volBaseSecret, BaseSecretDir, "STRATA_BASE_AUTHFILE")
	pull := container(ContainerPull, volScript, securityContext(),
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
	build := container(ContainerBuild, volInputs, securityContext(), buildEnv,
		storageMount, corev1.VolumeMount{Name: volLayout, MountPath: LayoutDir})
	pushEnv, pushMounts := registrySecret(req.PushSecret, volPushSecret, PushSecretDir, "STRATA_PUSH_AUTHFILE")
	push := container(ContainerPush, volScript, securityContext(),
		append([]corev1.EnvVar{layout, {Name: "STRATA_PUSH_SPEC", Value: req.PushSpec}}, pushEnv...),
		append([]corev1.VolumeMount{{Name: volLayout, MountPath: LayoutDir, ReadOnly: true}}, pushMounts...)...)

	spec := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		// The script is each container's PID 1 and installs no SIGTERM
		// handler, so the kernel drops the kubelet's SIGTERM: a stopped
		// build (deadline, interruption) waits out the grace period for
		// SIGKILL. Nothing in the pod needs a clean shutdown.
		TerminationGracePeriodSeconds: ptr.To(int64(5)),
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		HostUsers:                     hostUsers(cfg),
		HostNetwork:                   p.HostNetwork,
		NodeSelector:                  nodeSelector(cfg),
		Tolerations:                   append([]corev1.Toleration(nil), p.Tolerations...),
		Affinity:                      affinity(p.Affinity),
		// Init containers run one after the other, each after the one
		// before succeeded: the push starts only when the build, and
		// every process it left, has ended.
		InitContainers: []corev1.Container{pull, build},
		Containers:     []corev1.Container{push},
		Volumes:        volumes,
	}
	if p.HostNetwork {
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	return spec
}

// hostUsers is the configured hostUsers, nil when unset.
func hostUsers(cfg Config) *bool {
	if cfg.HostUsers == nil {
		return nil
	}
	return ptr.To(*cfg.HostUsers)
}

// affinity is the placement's affinity with the default node affinity,
// which keeps build pods off control-plane nodes, when it has none.
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

// securityContext is each container's: all three need the same, see the
// package comment for how it was measured. No container is privileged or
// may gain privileges, and each keeps its own file system read-only.
func securityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: slices.Clone(containerCapabilities)},
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		// buildah, root without CAP_SYS_ADMIN, runs itself in a user
		// namespace it makes, which the runtime's default profile refuses.
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
	}
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// containerCapabilities are all a build pod's container keeps: what
// buildah needs to map the whole ID range into the user namespace it makes
// (uid_map and gid_map, 0 included).
var containerCapabilities = []corev1.Capability{"SETUID", "SETGID", "SETFCAP"}

// arch is the build's architecture, amd64 unless configured.
func arch(cfg Config) string {
	if cfg.Arch == "" {
		return "amd64"
	}
	return cfg.Arch
}

// nodeSelector is the placement's node selector plus the architecture:
// a build runs RUN steps, which only a node of the image's architecture
// can run. A selector that names an architecture itself is kept.
func nodeSelector(cfg Config) map[string]string {
	sel := copyMap(cfg.Placement.NodeSelector)
	if sel == nil {
		sel = map[string]string{}
	}
	if _, ok := sel[ArchLabel]; !ok {
		sel[ArchLabel] = arch(cfg)
	}
	return sel
}
