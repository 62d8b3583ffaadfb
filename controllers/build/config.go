package build

import (
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/internal/retry"
)

// DefaultHistory is how many finished builds a MachineOSConfig keeps
// besides the current one.
const DefaultHistory = 3

// DefaultBaseResolveInterval is how often a base image's tag is resolved
// again when the configuration does not say.
const DefaultBaseResolveInterval = 15 * time.Minute

// Config is the build controller's part of the controller configuration.
type Config struct {
	// Namespace holds the build Jobs, their Secrets and the Secrets
	// MachineOSConfigs name.
	Namespace string `json:"namespace,omitempty"`
	// BuilderImage runs the builds (Debian with buildah, skopeo and jq).
	BuilderImage string `json:"builderImage"`
	// BootDiskImage runs the boot disk Jobs (builder/diskjob): Debian
	// with ostree and e2fsprogs, and strata-bootdisk. Without it a
	// MachineOSConfig with spec.bootDisk gets a BootDiskFailed condition
	// naming this setting; images are built all the same.
	BootDiskImage string `json:"bootDiskImage,omitempty"`
	// Arch is the nodes' architecture, which picks the Containerfile
	// entry (amd64, arm64, ppc64le, s390x).
	Arch string `json:"arch,omitempty"`
	// Placement of build pods (node selector, tolerations, affinity,
	// resources, host network); by default they stay off control-plane
	// nodes, and resources left unset take job.DefaultResources.
	Placement job.Placement `json:"placement,omitempty"`
	// VolumeSizeLimits bound the build pods' emptyDirs (storage, layout,
	// scratch); unset ones take job.DefaultVolumeSizeLimits.
	VolumeSizeLimits job.VolumeSizeLimits `json:"volumeSizeLimits,omitempty"`
	// HostUsers, when false, runs build pods in a user namespace of their
	// own (the pod's hostUsers). Unset leaves the field unset: a runtime
	// without user namespace support cannot start such a pod.
	HostUsers *bool `json:"hostUsers,omitempty"`
	// BackoffLimit bounds the retries of a build Job.
	BackoffLimit int32 `json:"backoffLimit,omitempty"`
	// ActiveDeadlineSeconds bounds a build's run time.
	ActiveDeadlineSeconds int64 `json:"activeDeadlineSeconds,omitempty"`
	// InsecureRegistries are host[:port]s reached over plain HTTP.
	InsecureRegistries []string `json:"insecureRegistries,omitempty"`
	// History is how many finished builds to keep per MachineOSConfig.
	History int `json:"history,omitempty"`
	// BaseResolveInterval is how often a base image's tag is resolved
	// again: the pace at which pools follow their OS vendor's updates.
	BaseResolveInterval metav1.Duration `json:"baseResolveInterval,omitempty"`
	// MaxRetryDelay bounds how long a MachineOSConfig whose reconcile
	// failed in a way that may heal by itself (a registry that did not
	// answer) waits before the next try: tries back off from half a
	// second, doubling, up to this. Unset: DefaultMaxRetryDelay.
	MaxRetryDelay metav1.Duration `json:"maxRetryDelay,omitempty"`
}

// DefaultMaxRetryDelay is the longest wait between two tries of a
// MachineOSConfig whose reconcile failed, when the configuration does not
// say: a registry back from an outage is used again within it.
const DefaultMaxRetryDelay = retry.DefaultMaxDelay

// withDefaults fills what was left empty.
func (c Config) withDefaults() (Config, error) {
	if c.Namespace == "" {
		c.Namespace = "strata-system"
	}
	if c.Arch == "" {
		c.Arch = "amd64"
	}
	if c.History <= 0 {
		c.History = DefaultHistory
	}
	if c.BaseResolveInterval.Duration == 0 {
		c.BaseResolveInterval.Duration = DefaultBaseResolveInterval
	}
	if c.MaxRetryDelay.Duration == 0 {
		c.MaxRetryDelay.Duration = DefaultMaxRetryDelay
	}
	if c.MaxRetryDelay.Duration < 0 {
		return c, errors.New("maxRetryDelay must not be negative")
	}
	if c.BaseResolveInterval.Duration < 0 {
		return c, errors.New("baseResolveInterval must not be negative")
	}
	if c.BackoffLimit < 0 {
		return c, errors.New("backoffLimit must not be negative")
	}
	if c.BuilderImage == "" {
		return c, errors.New("builderImage is required")
	}
	if err := job.CheckResources(c.jobConfig()); err != nil {
		return c, err
	}
	return c, nil
}

func (c Config) jobConfig() job.Config {
	return job.Config{
		Namespace:             c.Namespace,
		BuilderImage:          c.BuilderImage,
		Placement:             c.Placement,
		BackoffLimit:          c.BackoffLimit,
		ActiveDeadlineSeconds: c.ActiveDeadlineSeconds,
		InsecureRegistries:    c.InsecureRegistries,
		Arch:                  machineosbuild.Platform(c.Arch).Architecture,
		VolumeSizeLimits:      c.VolumeSizeLimits,
		HostUsers:             c.HostUsers,
	}
}

// buildConfig is the MachineOSBuild reconciler's part.
func (c Config) buildConfig() machineosbuild.Config {
	return machineosbuild.Config{
		Namespace:     c.Namespace,
		BuilderImage:  c.BuilderImage,
		Arch:          c.Arch,
		BootDiskImage: c.BootDiskImage,
		Job:           c.jobConfig(),
		MaxRetryDelay: c.MaxRetryDelay.Duration,
	}
}
