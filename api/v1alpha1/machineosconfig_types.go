package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImageBuilderType names the mechanism that builds a layered pool's image.
// +kubebuilder:validation:Enum=Job
type ImageBuilderType string

const (
	// JobBuilder runs buildah in a Kubernetes Job on the cluster.
	JobBuilder ImageBuilderType = "Job"
)

// ContainerfileArch is the architecture a Containerfile snippet applies to.
// +kubebuilder:validation:Enum=ARM64;AMD64;PPC64LE;S390X;NoArch
type ContainerfileArch string

const (
	ContainerfileArchARM64   ContainerfileArch = "ARM64"
	ContainerfileArchAMD64   ContainerfileArch = "AMD64"
	ContainerfileArchPPC64LE ContainerfileArch = "PPC64LE"
	ContainerfileArchS390X   ContainerfileArch = "S390X"
	// ContainerfileArchNoArch applies to every architecture that has no
	// entry of its own.
	ContainerfileArchNoArch ContainerfileArch = "NoArch"
)

// BuildStrategy says how a layered pool's image is put together.
// +kubebuilder:validation:Enum=ConfigLayer;SingleJob
type BuildStrategy string

const (
	// ConfigLayerStrategy builds the admin stage in a Job only when its own
	// inputs change and adds the configuration on top as one layer, made
	// and pushed by the controller.
	ConfigLayerStrategy BuildStrategy = "ConfigLayer"
	// SingleJobStrategy builds the whole image in one Job.
	SingleJobStrategy BuildStrategy = "SingleJob"
)

// MachineOSImageBuilder says how images are built.
type MachineOSImageBuilder struct {
	// imageBuilderType is the build mechanism. Only Job is supported.
	// +required
	ImageBuilderType ImageBuilderType `json:"imageBuilderType"`

	// strategy is how the image is put together.
	//
	// ConfigLayer (the default): the admin stage, which is the base image
	// with the pool's kernel type and extensions and this MachineOSConfig's
	// containerFile content, is built by a Job only when those change, and
	// kept in the registry. The pool's configuration (files, units, kernel
	// arguments) is then added on top as one layer by the controller, which
	// uploads only that layer, the image config and the manifest: a
	// configuration change reaches the registry in about a second whatever
	// the size of the base. The one difference users see: containerFile RUN
	// steps run on the base image and do not see the configuration's files,
	// which are applied after them; in exchange a configuration change never
	// runs them again.
	//
	// SingleJob: one Job builds everything, the configuration first and the
	// containerFile content on top, so RUN steps see the configuration's
	// files; every configuration change runs them again.
	//
	// A configuration that needs a RUN step of its own (an append to a file
	// of the base image, an owner given by name, a unit of the base image to
	// enable or disable) is built as SingleJob whatever this says; the
	// MachineOSBuild's status.strategyReason says why.
	// +optional
	// +kubebuilder:default=ConfigLayer
	Strategy BuildStrategy `json:"strategy,omitempty"`
}

// MachineOSContainerfile is Containerfile content added to the image: on
// the base image in the ConfigLayer strategy, after the rendered
// configuration in SingleJob.
type MachineOSContainerfile struct {
	// containerfileArch is the architecture the content applies to:
	// ARM64, AMD64, PPC64LE, S390X, or NoArch for every architecture without
	// an entry of its own. Defaults to NoArch.
	// +optional
	// +kubebuilder:default=NoArch
	ContainerfileArch ContainerfileArch `json:"containerfileArch,omitempty"`

	// content is Containerfile instructions, without a FROM line: they run
	// on the base image (strategy ConfigLayer) or on top of the rendered
	// configuration (SingleJob).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	Content string `json:"content"`
}

// MachineOSConfigSpec turns a pool into a layered pool and says how its
// image is built and where it is pushed.
//
// Every Secret it names (renderedImagePushSecret, renderedImagePullSecret,
// baseImagePullSecret, signing.keySecret) is in strata-system, and the API
// server refuses a MachineOSConfig whose author may not get one of them
// there (the admission policy strata-machineosconfig-secret-access, on
// create and when a name changes): naming a Secret gives its use to the
// controller and, for the pull secret, its content to the pool's nodes.
type MachineOSConfigSpec struct {
	// machineConfigPool names the pool this config layers. One
	// MachineOSConfig per pool.
	// +required
	MachineConfigPool LocalObjectReference `json:"machineConfigPool"`

	// imageBuilder says how the image is built.
	// +required
	ImageBuilder MachineOSImageBuilder `json:"imageBuilder"`

	// baseImagePullSpec overrides the base OS image that would otherwise
	// come from the pool's rendered osImageURL. It is resolved to a digest
	// when a build starts. When it overrides a MachineConfig's osImageURL,
	// the Degraded condition stays False with reason
	// BaseImageOverridesOSImageURL, naming that MachineConfig.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	BaseImagePullSpec string `json:"baseImagePullSpec,omitempty"`

	// baseImagePullSecret is the Secret used to pull the base image. Empty
	// pulls anonymously.
	// +optional
	BaseImagePullSecret *SecretReference `json:"baseImagePullSecret,omitempty"`

	// renderedImagePushSecret is the Secret used to push the built image.
	// +required
	RenderedImagePushSecret SecretReference `json:"renderedImagePushSecret"`

	// renderedImagePullSecret is the Secret nodes use to pull the built
	// image; the daemon writes it where bootc reads credentials. Empty pulls
	// anonymously.
	// +optional
	RenderedImagePullSecret *SecretReference `json:"renderedImagePullSecret,omitempty"`

	// renderedImagePushSpec is where built images are pushed, as
	// registry/repository:tag. Nodes always pull the pushed digest, never
	// the tag.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.contains('@')",message="renderedImagePushSpec must be registry/repository:tag, not a digest"
	// +kubebuilder:validation:XValidation:rule="self.matches('^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$')",message="renderedImagePushSpec must be registry/repository:tag with a registry host and a tag"
	RenderedImagePushSpec string `json:"renderedImagePushSpec"`

	// containerFile is Containerfile content added to the image, at most
	// one entry per architecture; see imageBuilder.strategy for where.
	// +optional
	// +listType=map
	// +listMapKey=containerfileArch
	// +kubebuilder:validation:MaxItems=5
	ContainerFile []MachineOSContainerfile `json:"containerFile,omitempty"`

	// imageApproval says whether a built image needs an approval before
	// the pool's nodes get it. Automatic (the default) rolls out every
	// image that builds. Required holds the nodes where they are until the
	// image's MachineOSBuild has the condition ImageApproved=True, set by
	// whatever checks the image (a registry scanner, a CI job, or a person
	// with stratactl approve); ImageApproved=False (stratactl reject)
	// means the image never rolls out. Every new build is gated again.
	// +optional
	// +kubebuilder:default=Automatic
	ImageApproval ImageApproval `json:"imageApproval,omitempty"`

	// signing signs the pool's images and makes its nodes verify them,
	// with bootc's --enforce-container-sigpolicy, on every path by which
	// an image reaches a node: the update's switch, a download ahead of
	// it (stageAhead; a node whose bootc cannot verify a download-only
	// switch does not stage ahead, and a NotStagedAhead Event says so),
	// a new node's first boot, and a rollback, which goes only to the
	// image the node ran before the update. An image that fails is not
	// booted; the node reports Degraded, refused by the signature policy.
	// +optional
	Signing *ImageSigning `json:"signing,omitempty"`

	// baseImageVerification verifies the base image's signature before a
	// build uses it.
	// +optional
	BaseImageVerification *BaseImageVerification `json:"baseImageVerification,omitempty"`

	// bootDisk makes every succeeded build also make a raw disk image of
	// its image, for new nodes to boot from, published beside the image
	// in its repository as an OCI artifact (artifact type
	// application/vnd.strata.bootdisk.raw.v1, the image as its subject).
	// The build's status.bootDisk names it and its BootDisk condition
	// says how making it goes; the image rolls out without waiting for
	// it. Absent: no disk.
	// +optional
	BootDisk *BootDisk `json:"bootDisk,omitempty"`
}

// ImageApproval says whether a built image needs an approval before it
// rolls out.
// +kubebuilder:validation:Enum=Automatic;Required
type ImageApproval string

const (
	// ImageApprovalAutomatic rolls out every image that builds.
	ImageApprovalAutomatic ImageApproval = "Automatic"
	// ImageApprovalRequired rolls out an image only once its build has
	// ImageApproved=True.
	ImageApprovalRequired ImageApproval = "Required"
)

// MachineOSConfigStatus is the observed state of a MachineOSConfig.
type MachineOSConfigStatus struct {
	// observedGeneration is the generation last processed.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the config's state.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// currentImagePullSpec is the image the pool's nodes should run, as
	// registry/repository@sha256:digest.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*@sha256:[a-f0-9]{64}$')",message="currentImagePullSpec must be registry/repository@sha256:<64 hex digits>"
	CurrentImagePullSpec string `json:"currentImagePullSpec,omitempty"`

	// machineOSBuild names the newest MachineOSBuild of this config.
	// +optional
	MachineOSBuild *LocalObjectReference `json:"machineOSBuild,omitempty"`

	// baseImage is the base image builds use, pinned by digest. A tag is
	// resolved again on the controller's interval (baseResolveInterval, 15
	// minutes by default) and when the MachineOSConfig is annotated
	// machineconfiguration.strata.dev/resolve-base; nothing else moves it,
	// so an unrelated event never starts a build on a new base. When the tag
	// has moved, an Event says so, a new build starts and the rollout takes
	// its image to the nodes.
	// +optional
	BaseImage *ResolvedImage `json:"baseImage,omitempty"`

	// adminStages are the admin stage images (strategy ConfigLayer) that
	// this MachineOSConfig's build Jobs built and pushed, by digest, newest
	// first: the only ones a build reuses. An admin stage tag that points
	// to another image (pushed or moved by someone else) is not used: the
	// stage is reused from the digest recorded here, or built again, and
	// the build says so (a Warning Event and its AdminStage stage's
	// message). Garbage collection removes an entry with its image.
	// +optional
	// +listType=map
	// +listMapKey=tag
	// +kubebuilder:validation:MaxItems=8
	AdminStages []AdminStageRecord `json:"adminStages,omitempty"`
}

// AdminStageRecord is an admin stage image a build Job of Strata's pushed.
type AdminStageRecord struct {
	// tag is where the stage is kept: the push repository, tagged
	// admin-<hash of the stage's inputs and the builder image>.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Tag string `json:"tag"`
	// image is what the Job pushed to tag, as
	// registry/repository@sha256:digest.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*@sha256:[a-f0-9]{64}$')",message="image must be registry/repository@sha256:<64 hex digits>"
	Image string `json:"image"`
	// build names the MachineOSBuild whose Job built the stage.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Build string `json:"build"`
	// builtTime is when the Job finished building it.
	// +required
	BuiltTime metav1.Time `json:"builtTime"`
}

// ResolvedImage is an image reference and the digest it resolved to.
type ResolvedImage struct {
	// pullSpec is the image as named: spec.baseImagePullSpec, or the
	// rendered configuration's osImageURL.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	PullSpec string `json:"pullSpec"`
	// digestedPullSpec is what pullSpec resolved to, as
	// registry/repository@sha256:digest.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*@sha256:[a-f0-9]{64}$')",message="digestedPullSpec must be registry/repository@sha256:<64 hex digits>"
	DigestedPullSpec string `json:"digestedPullSpec"`
	// resolvedTime is when pullSpec was last resolved.
	// +required
	ResolvedTime metav1.Time `json:"resolvedTime"`
}

// MachineOSConfig turns a MachineConfigPool into a layered pool: its
// configuration is built into a derived OS image on the cluster and nodes
// switch to that image. Deleting it rolls the pool back to the base image.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mosc
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.machineConfigPool.name`
// +kubebuilder:printcolumn:name="Build",type=string,JSONPath=`.status.machineOSBuild.name`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.currentImagePullSpec`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MachineOSConfig struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec MachineOSConfigSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status MachineOSConfigStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MachineOSConfigList is a list of MachineOSConfigs.
type MachineOSConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineOSConfig `json:"items"`
}
