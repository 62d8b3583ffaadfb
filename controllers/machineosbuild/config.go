package machineosbuild

import (
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/strata-dev/strata/builder/diskjob"
	"github.com/strata-dev/strata/builder/job"
)

// Config is what the MachineOSBuild reconciler is given by the build
// controller's configuration (controllers/build.Config), with its
// defaults filled.
type Config struct {
	// Namespace holds the build Jobs, their Secrets and the Secrets
	// MachineOSConfigs name.
	Namespace string
	// BuilderImage runs the build Jobs; it is one of the inputs.
	BuilderImage string
	// Arch is the nodes' architecture, in Go's or the kernel's spelling.
	Arch string
	// BootDiskImage runs the boot disk Jobs; "" makes no disk.
	BootDiskImage string
	// Job configures the build Jobs, and the boot disk Jobs as well
	// (diskJob).
	Job job.Config
	// MaxRetryDelay bounds the wait before a step that failed in a way
	// that may heal by itself is tried again.
	MaxRetryDelay time.Duration
}

// diskJob is the boot disk Jobs' configuration: placed, bounded and
// reaching registries as the build Jobs.
func (c Config) diskJob() diskjob.Config {
	return diskjob.Config{
		Namespace:             c.Job.Namespace,
		Image:                 c.BootDiskImage,
		Placement:             c.Job.Placement,
		BackoffLimit:          c.Job.BackoffLimit,
		ActiveDeadlineSeconds: c.Job.ActiveDeadlineSeconds,
		InsecureRegistries:    c.Job.InsecureRegistries,
		Arch:                  c.Job.Arch,
		HostUsers:             c.Job.HostUsers,
	}
}

// Platform is the image platform of the nodes' architecture, in Go's or
// the kernel's spelling.
func Platform(arch string) v1.Platform {
	switch arch {
	case "x86_64":
		arch = "amd64"
	case "aarch64":
		arch = "arm64"
	}
	return v1.Platform{OS: "linux", Architecture: arch}
}
