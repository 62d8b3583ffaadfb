package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BuildStep names the part of a build that failed, so that a person knows
// where to look.
// +kubebuilder:validation:Enum=Prepare;PullBase;Auth;Build;Layer;Push;Disk;Unknown
type BuildStep string

const (
	// BuildStepPrepare: the inputs could not be rendered or delivered.
	BuildStepPrepare BuildStep = "Prepare"
	// BuildStepPullBase: the base image could not be pulled.
	BuildStepPullBase BuildStep = "PullBase"
	// BuildStepAuth: a registry refused the credentials.
	BuildStepAuth BuildStep = "Auth"
	// BuildStepBuild: a Containerfile instruction failed.
	BuildStepBuild BuildStep = "Build"
	// BuildStepLayer: the configuration layer could not be made.
	BuildStepLayer BuildStep = "Layer"
	// BuildStepPush: the image could not be pushed.
	BuildStepPush BuildStep = "Push"
	// BuildStepDisk: the boot disk of the image could not be made (its
	// image read, its sysroot deployed, its file system written).
	BuildStepDisk BuildStep = "Disk"
	// BuildStepUnknown: the builder ended without saying why.
	BuildStepUnknown BuildStep = "Unknown"
)

// MachineOSBuildSpec is one set of build inputs. It never changes: new
// inputs make a new MachineOSBuild.
type MachineOSBuildSpec struct {
	// machineConfig names the rendered MachineConfig built into the image.
	// +required
	MachineConfig LocalObjectReference `json:"machineConfig"`

	// machineOSConfig names the MachineOSConfig this build belongs to.
	// +required
	MachineOSConfig LocalObjectReference `json:"machineOSConfig"`

	// renderedImagePushSpec is the registry/repository:tag the image is
	// pushed to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$')",message="renderedImagePushSpec must be registry/repository:tag with a registry host and a tag"
	RenderedImagePushSpec string `json:"renderedImagePushSpec"`
}

// ObjectReference names a namespaced object of a known group and resource.
type ObjectReference struct {
	// group of the object ("batch" for a Job).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// resource of the object ("jobs").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Resource string `json:"resource"`
	// namespace of the object.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// MachineOSBuilderReference says which builder ran a build.
type MachineOSBuilderReference struct {
	// imageBuilderType is the mechanism that ran the build.
	// +required
	ImageBuilderType ImageBuilderType `json:"imageBuilderType"`
	// job is the Job running the build, for the Job builder.
	// +optional
	Job *ObjectReference `json:"job,omitempty"`
}

// BuildStage names a stage of a build.
// +kubebuilder:validation:Enum=AdminStage;ConfigLayer;Job;Attach
type BuildStage string

const (
	// BuildStageAdmin makes the admin stage image (ConfigLayer strategy):
	// a Job, or nothing when an earlier build's Job made it already.
	BuildStageAdmin BuildStage = "AdminStage"
	// BuildStageConfigLayer makes the configuration layer and pushes the
	// image (ConfigLayer strategy), in the controller.
	BuildStageConfigLayer BuildStage = "ConfigLayer"
	// BuildStageJob builds and pushes the whole image in one Job
	// (SingleJob strategy).
	BuildStageJob BuildStage = "Job"
	// BuildStageAttach makes the image's SBOM and provenance and attaches
	// them to it as OCI referrers, in the controller.
	BuildStageAttach BuildStage = "Attach"
)

// ImageReferrer is an artifact attached to the built image as an OCI
// referrer (an image manifest whose subject is the image).
type ImageReferrer struct {
	// artifactType is the artifact's media type: application/spdx+json
	// for the SBOM, application/vnd.in-toto+json for the provenance.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	ArtifactType string `json:"artifactType"`
	// digest of the referrer's manifest, in the image's repository.
	// +required
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest"`
}

// BuildStageStatus is what one stage of a build did and how long it took.
type BuildStageStatus struct {
	// name of the stage.
	// +required
	Name BuildStage `json:"name"`
	// image the stage produced, by digest: the admin stage's image, or the
	// built image.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`
	// reused is true when the stage's image was one an earlier build's Job
	// made (recorded in the MachineOSConfig's status.adminStages), or is
	// the base image itself, and nothing ran.
	// +optional
	Reused bool `json:"reused,omitempty"`
	// startTime is when the stage started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// duration is how long the stage took, once it ended.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// message says what the stage found that a person should know: an
	// admin stage tag pointing to an image Strata did not build, which was
	// not used.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// BuildFailure says what failed in a build, in words a person can act on.
type BuildFailure struct {
	// stage is the stage that failed, when the build has stages.
	// +optional
	Stage BuildStage `json:"stage,omitempty"`
	// step is the part of the build that failed.
	// +required
	Step BuildStep `json:"step"`
	// message says what failed, for example the Containerfile instruction
	// and its line.
	// +required
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message"`
	// logTail is the last lines of the build log.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	LogTail string `json:"logTail,omitempty"`
}

// Limits of a BuildFailure's fields, as its validation says (a test
// compares them with the generated CRD): what a builder or a registry
// says is cut to fit before the status is written.
const (
	MaxBuildFailureMessage = 4096
	MaxBuildFailureLogTail = 16384
)

// MachineOSBuildStatus is the observed state of a build.
type MachineOSBuildStatus struct {
	// conditions: Prepared, Building, Succeeded, Failed, Interrupted.
	// Succeeded and Failed are final. Interrupted ends an attempt whose
	// inputs stopped being the pool's current ones; it is final only while
	// they stay so: when the inputs come back (a change reverted), the
	// controller starts the build again as a new attempt (status.attempt
	// grows by one, the conditions go back to Prepared), so a build of the
	// current inputs always ends Succeeded or Failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// attempt counts the runs of this build: 1 (or unset) for the first,
	// one more each time an interrupted build's inputs became current
	// again and it was started anew. The status describes the latest.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Attempt int32 `json:"attempt,omitempty"`

	// builder is the builder running or that ran the build.
	// +optional
	Builder *MachineOSBuilderReference `json:"builder,omitempty"`

	// buildStart is when the builder started.
	// +optional
	BuildStart *metav1.Time `json:"buildStart,omitempty"`

	// buildEnd is when the build reached a terminal condition.
	// +optional
	BuildEnd *metav1.Time `json:"buildEnd,omitempty"`

	// baseImagePullSpec is the base image the build ran on, by digest.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*@sha256:[a-f0-9]{64}$')",message="baseImagePullSpec must be registry/repository@sha256:<64 hex digits>"
	BaseImagePullSpec string `json:"baseImagePullSpec,omitempty"`

	// digestedImagePushSpec is the pushed image, by digest.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*@sha256:[a-f0-9]{64}$')",message="digestedImagePushSpec must be registry/repository@sha256:<64 hex digits>"
	DigestedImagePushSpec string `json:"digestedImagePushSpec,omitempty"`

	// failure says what failed, when the build failed.
	// +optional
	Failure *BuildFailure `json:"failure,omitempty"`

	// strategy is how this build puts the image together: ConfigLayer or
	// SingleJob (see MachineOSConfig spec.imageBuilder.strategy).
	// +optional
	Strategy BuildStrategy `json:"strategy,omitempty"`

	// strategyReason says why a build of a ConfigLayer MachineOSConfig
	// runs as SingleJob.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	StrategyReason string `json:"strategyReason,omitempty"`

	// stages are the build's stages in order, with what each made and how
	// long it took.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	Stages []BuildStageStatus `json:"stages,omitempty"`

	// referrers are the artifacts attached to the image, once it is
	// built: its SBOM and its provenance.
	// +optional
	// +listType=map
	// +listMapKey=artifactType
	// +kubebuilder:validation:MaxItems=8
	Referrers []ImageReferrer `json:"referrers,omitempty"`

	// signatures are the signatures the controller added to the image,
	// one per signing key it used (two after a key rotation).
	// +optional
	// +listType=map
	// +listMapKey=keyFingerprint
	// +kubebuilder:validation:MaxItems=8
	Signatures []ImageSignature `json:"signatures,omitempty"`

	// bootDisk is the raw disk image of the built image, when the
	// MachineOSConfig asks for one (spec.bootDisk): where it is published
	// and how large it is. The BootDisk condition says whether it is
	// ready.
	// +optional
	BootDisk *BootDiskStatus `json:"bootDisk,omitempty"`
}

// MachineOSBuild is one build of one set of inputs, named
// <machineosconfig>-<hash of the inputs>.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mosb
// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="spec is immutable: new build inputs make a new MachineOSBuild"
// +kubebuilder:printcolumn:name="Prepared",type=string,JSONPath=`.status.conditions[?(@.type=="Prepared")].status`
// +kubebuilder:printcolumn:name="Building",type=string,JSONPath=`.status.conditions[?(@.type=="Building")].status`
// +kubebuilder:printcolumn:name="Succeeded",type=string,JSONPath=`.status.conditions[?(@.type=="Succeeded")].status`
// +kubebuilder:printcolumn:name="Interrupted",type=string,JSONPath=`.status.conditions[?(@.type=="Interrupted")].status`
// +kubebuilder:printcolumn:name="Failed",type=string,JSONPath=`.status.conditions[?(@.type=="Failed")].status`
// +kubebuilder:printcolumn:name="Attempt",type=integer,JSONPath=`.status.attempt`
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.status.strategy`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.digestedImagePushSpec`,priority=1
// +kubebuilder:printcolumn:name="BootDisk",type=string,JSONPath=`.status.conditions[?(@.type=="BootDisk")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MachineOSBuild struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the build's inputs; immutable.
	// +required
	Spec MachineOSBuildSpec `json:"spec"`

	// status is the build's progress and result.
	// +optional
	Status MachineOSBuildStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MachineOSBuildList is a list of MachineOSBuilds.
type MachineOSBuildList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineOSBuild `json:"items"`
}
