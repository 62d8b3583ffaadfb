package job

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// VolumeSizeLimits bound the build pod's emptyDirs. The kubelet evicts a
// pod whose volume outgrows its limit, so a build that fills its disk
// fails with the kubelet's reason instead of filling the node's. An empty
// field takes its default (DefaultVolumeSizeLimits).
type VolumeSizeLimits struct {
	// Storage bounds buildah's image storage, which the pull and build
	// containers share: the base image and the built one, unpacked (with
	// the vfs driver, once per layer).
	Storage *resource.Quantity `json:"storage,omitempty"`
	// Layout bounds the OCI layout the build container writes and the
	// push container reads: the built image, compressed.
	Layout *resource.Quantity `json:"layout,omitempty"`
	// Scratch bounds each container's own directory: the unpacked build
	// context, logs, and buildah's temporary files (the base image's
	// blobs, compressed, while they are pulled).
	Scratch *resource.Quantity `json:"scratch,omitempty"`
}

// DefaultVolumeSizeLimits are the limits of the volumes a configuration
// leaves unset: room for a bootc base of a few GiB.
func DefaultVolumeSizeLimits() VolumeSizeLimits {
	return VolumeSizeLimits{
		Storage: ptrTo(resource.MustParse("50Gi")),
		Layout:  ptrTo(resource.MustParse("10Gi")),
		Scratch: ptrTo(resource.MustParse("10Gi")),
	}
}

// DefaultResources are the requests and limits of each build container
// that a configuration leaves unset. The memory limit leaves room for a
// package manager and dracut in RUN steps; the ephemeral-storage limit,
// unless configured, is computed from the volumes' size limits
// (ephemeralStorageLimit).
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("500m"),
			corev1.ResourceMemory:           resource.MustParse("1Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("8Gi"),
		},
	}
}

// writableLayerAllowance is what a container may write besides its
// volumes (logs; its root file system is read-only).
var writableLayerAllowance = resource.MustParse("1Gi")

func ptrTo(q resource.Quantity) *resource.Quantity { return &q }

// volumeSizeLimits are the configured limits with the defaults filled in.
func volumeSizeLimits(cfg Config) VolumeSizeLimits {
	v, d := cfg.VolumeSizeLimits, DefaultVolumeSizeLimits()
	if v.Storage == nil {
		v.Storage = d.Storage
	}
	if v.Layout == nil {
		v.Layout = d.Layout
	}
	if v.Scratch == nil {
		v.Scratch = d.Scratch
	}
	return v
}

// containerResources are each build container's requests and limits: the
// placement's, with DefaultResources for every one it leaves unset, and
// an ephemeral-storage limit that holds every volume of the pod. The
// kubelet counts a pod's emptyDirs against the largest of its containers'
// limits (they run one after the other), so a smaller one would evict
// the pod before any volume reached its own limit.
func containerResources(cfg Config) corev1.ResourceRequirements {
	r := *cfg.Placement.Resources.DeepCopy()
	d := DefaultResources()
	fill := func(list *corev1.ResourceList, defaults corev1.ResourceList) {
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		for k, v := range defaults {
			if _, ok := (*list)[k]; !ok {
				(*list)[k] = v
			}
		}
	}
	fill(&r.Requests, d.Requests)
	fill(&r.Limits, d.Limits)
	if _, ok := r.Limits[corev1.ResourceEphemeralStorage]; !ok {
		r.Limits[corev1.ResourceEphemeralStorage] = ephemeralStorageLimit(volumeSizeLimits(cfg))
	}
	return r
}

// ephemeralStorageLimit is what the pod's volumes may hold together (one
// scratch directory per container), and the writable layer's allowance.
func ephemeralStorageLimit(v VolumeSizeLimits) resource.Quantity {
	total := v.Storage.DeepCopy()
	total.Add(*v.Layout)
	for range 3 {
		total.Add(*v.Scratch)
	}
	total.Add(writableLayerAllowance)
	return total
}

// CheckResources refuses limits that cannot work, naming the
// configuration's field: a volume size that is not positive, a request
// above its limit.
func CheckResources(cfg Config) error {
	var errs []error
	for _, q := range []struct {
		name string
		q    *resource.Quantity
	}{{"storage", cfg.VolumeSizeLimits.Storage}, {"layout", cfg.VolumeSizeLimits.Layout}, {"scratch", cfg.VolumeSizeLimits.Scratch}} {
		if q.q != nil && q.q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("volumeSizeLimits.%s: %s is not a size", q.name, q.q.String()))
		}
	}
	r := containerResources(cfg)
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, fmt.Errorf("placement.resources: the %s request %s is above its limit %s", name, req.String(), lim.String()))
		}
	}
	return errors.Join(errs...)
}
