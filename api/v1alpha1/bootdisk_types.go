package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// BootDiskArtifactType is the artifact type of a boot disk published
// beside its image: the referrer manifest's artifactType. Its one layer
// is the raw disk compressed with zstd (BootDiskLayerMediaType).
const BootDiskArtifactType = "application/vnd.strata.bootdisk.raw.v1"

// BootDiskLayerMediaType is the media type of a boot disk artifact's one
// layer: the raw disk image, zstd-compressed.
const BootDiskLayerMediaType = "application/vnd.strata.bootdisk.raw.v1+zstd"

// Defaults and bounds of BootDisk.SizeMiB.
const (
	DefaultBootDiskSizeMiB = 4096
	MinBootDiskSizeMiB     = 512
	MaxBootDiskSizeMiB     = 65536
)

// BootDisk asks that each succeeded build of the MachineOSConfig also
// make a raw disk image of its image, to boot new nodes straight into
// the pool's image (no first-boot switch, no reboot).
type BootDisk struct {
	// sizeMiB is the size of the raw disk in MiB: one ext4 file system,
	// no partition table, holding an ostree sysroot with the image
	// deployed. The file is sparse, and it is published compressed, so
	// unused space costs little. Default 4096.
	// +optional
	// +kubebuilder:default=4096
	// +kubebuilder:validation:Minimum=512
	// +kubebuilder:validation:Maximum=65536
	SizeMiB int32 `json:"sizeMiB,omitempty"`
}

// BootDiskStatus is the boot disk of a build's image.
type BootDiskStatus struct {
	// artifact is the boot disk's OCI artifact by digest,
	// registry/repository@sha256:…: an image manifest in the image's
	// repository whose subject is the image, whose artifactType is
	// application/vnd.strata.bootdisk.raw.v1 and whose one layer is the
	// zstd-compressed raw disk. `stratactl boot-disk` downloads it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*@sha256:[a-f0-9]{64}$')",message="artifact must be registry/repository@sha256:<64 hex digits>"
	Artifact string `json:"artifact,omitempty"`
	// image is the image the disk holds, by digest (the artifact's
	// subject): the build's digestedImagePushSpec.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`
	// sizeMiB is the size the disk was made with (spec.bootDisk.sizeMiB
	// then): a MachineOSConfig that asks for another size has the disk
	// made again.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SizeMiB int32 `json:"sizeMiB,omitempty"`
	// size is the raw disk's size in bytes, uncompressed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Size int64 `json:"size,omitempty"`
	// compressedSize is the size in bytes of the artifact's compressed
	// layer, what a download transfers.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CompressedSize int64 `json:"compressedSize,omitempty"`
	// rawDigest is the sha256 digest of the uncompressed raw disk, which
	// a download checks after decompressing.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	RawDigest string `json:"rawDigest,omitempty"`
	// job is the Job that makes and publishes the disk.
	// +optional
	Job *ObjectReference `json:"job,omitempty"`
	// startTime is when the disk's Job was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// duration is how long making and publishing the disk took, once it
	// ended.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// failure says what failed, when the disk could not be made.
	// +optional
	Failure *BuildFailure `json:"failure,omitempty"`
}
