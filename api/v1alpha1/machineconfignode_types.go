package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of MachineConfigNode: OpenShift's, those that apply to
// a bootc node updated by Strata. Each says how far the node's latest
// update got: False, not reached (or, with reason NotRequired, not part
// of this update); Unknown, in progress; True, done. A condition's
// lastTransitionTime changes only when its status does, so the time a
// phase took is the difference between two conditions' times.
const (
	// MCNUpdatePrepared: the daemon took the update on and knows what it
	// costs the node (the disruption decision, made once the image is
	// staged). Unknown while the image is staged and the decision made.
	MCNUpdatePrepared = "UpdatePrepared"
	// MCNImagePulledFromRegistry: the desired image is downloaded and
	// staged for the next boot (bootc switch). Strata stages before the
	// drain, while the workloads still run.
	MCNImagePulledFromRegistry = "ImagePulledFromRegistry"
	// MCNUpdateExecuted: the update's body is done: the node cordoned and
	// drained where the update needs it, the files written and the image
	// set to boot next (or, for a live update, applied).
	MCNUpdateExecuted = "UpdateExecuted"
	// MCNCordoned: the node is cordoned for the update (the rollout
	// controller cordons it when the daemon asks for the drain).
	MCNCordoned = "Cordoned"
	// MCNDrained: the rollout controller drained the node for the update.
	MCNDrained = "Drained"
	// MCNAppliedFiles: the update's files are written: those bound for
	// /var by the daemon, those of /etc by the image.
	MCNAppliedFiles = "AppliedFiles"
	// MCNAppliedOSImage: the desired image is deployed to boot next, or,
	// for a live update, its configuration applied to the running node.
	MCNAppliedOSImage = "AppliedOSImage"
	// MCNRebootedNode: the node rebooted (or soft-rebooted) into the
	// desired image. Unknown from the reboot's request until the node is
	// back.
	MCNRebootedNode = "RebootedNode"
	// MCNUpdateComplete: the node booted the desired image and passed
	// its health check; Unknown while it is checked.
	MCNUpdateComplete = "UpdateComplete"
	// MCNUpdated: the node runs its desired config and image and reports
	// Done.
	MCNUpdated = "Updated"
	// MCNNodeDegraded: the node's update failed (the node runs its
	// previous image) or the drain did not finish in time; the message
	// says why.
	MCNNodeDegraded = "NodeDegraded"
)

// Reasons of MachineConfigNode conditions.
const (
	// ReasonMCNNotYetOccurred: the update has not reached this phase.
	ReasonMCNNotYetOccurred = "NotYetOccurred"
	// ReasonMCNNotRequired: this update does not need this phase (a live
	// update needs no reboot, a config change on the running image no
	// drain).
	ReasonMCNNotRequired = "NotRequired"
	// ReasonMCNInProgress: the phase is under way.
	ReasonMCNInProgress = "InProgress"
	// ReasonMCNDone: the phase is done.
	ReasonMCNDone = "Done"
	// ReasonMCNFailed: the update failed; the message says why.
	ReasonMCNFailed = "Failed"
	// ReasonMCNNoUpdate: the node has no desired image yet.
	ReasonMCNNoUpdate = "NoUpdate"
)

// MachineConfigNode reports one node's update, as OpenShift's kind of the
// same name does: the desired and current config and image, and how far
// the node's latest update got, phase by phase, in conditions.
//
// It is a mirror, not a protocol: the Node's annotations
// (machineconfiguration.strata.dev/desiredImage, currentImage, state,
// ...) stay the one source of truth between the rollout controller and
// the node's daemon, and nothing acts on a MachineConfigNode. The node's
// daemon writes it, spec and status, from its own state after each step
// of an update; nothing else does (an admission policy lets a daemon
// write only the MachineConfigNode of its own node). Its name is the
// node's, and it is owned by the Node, so it goes with it. A write that
// fails never holds an update back: the daemon writes it again at its
// next step.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=mcn
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="PoolName",type="string",JSONPath=".spec.pool.name"
// +kubebuilder:printcolumn:name="DesiredConfig",type="string",JSONPath=".spec.configVersion.desired"
// +kubebuilder:printcolumn:name="CurrentConfig",type="string",JSONPath=".status.configVersion.current"
// +kubebuilder:printcolumn:name="Updated",type="string",JSONPath=".status.conditions[?(@.type==\"Updated\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="DesiredImage",type="string",JSONPath=".spec.configImage.desiredImage",priority=1
// +kubebuilder:printcolumn:name="CurrentImage",type="string",JSONPath=".status.configImage.currentImage",priority=1
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.state",priority=1
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.reason",priority=1
// +kubebuilder:validation:XValidation:rule="self.metadata.name == self.spec.node.name",message="spec.node.name should match metadata.name"
type MachineConfigNode struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata; the name is the node's.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the rollout controller asks of the node, copied by the
	// daemon from the Node's annotations.
	// +required
	Spec MachineConfigNodeSpec `json:"spec"`

	// status is what the node's daemon observed of its update.
	// +optional
	Status MachineConfigNodeStatus `json:"status,omitempty"`
}

// MachineConfigNodeSpec names the node, its pool and what it should run.
type MachineConfigNodeSpec struct {
	// node is the Node this object reports on; its name is the object's.
	// +required
	Node LocalObjectReference `json:"node"`

	// pool is the MachineConfigPool the node belongs to (the Node's pool
	// annotation); empty until the rollout controller takes the node
	// into a pool.
	// +optional
	Pool MachineConfigNodePool `json:"pool,omitzero"`

	// configVersion holds the rendered MachineConfig the node should run
	// (the Node's desiredConfig annotation).
	// +optional
	ConfigVersion MachineConfigNodeSpecConfigVersion `json:"configVersion,omitzero"`

	// configImage holds the image the node should run (the Node's
	// desiredImage annotation).
	// +optional
	ConfigImage MachineConfigNodeSpecConfigImage `json:"configImage,omitzero"`
}

// MachineConfigNodePool names a MachineConfigPool.
type MachineConfigNodePool struct {
	// name is the pool's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// MachineConfigNodeSpecConfigVersion is the desired rendered config.
type MachineConfigNodeSpecConfigVersion struct {
	// desired is the name of the rendered MachineConfig the node should
	// run; empty while the node has none.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Desired string `json:"desired,omitempty"`
}

// MachineConfigNodeSpecConfigImage is the desired image.
type MachineConfigNodeSpecConfigImage struct {
	// desiredImage is the image the node should run, by digest
	// (registry/repository@sha256:<64 hex>); empty while the node has
	// none.
	// +optional
	// +kubebuilder:validation:MaxLength=447
	// +kubebuilder:validation:Pattern=`^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*@sha256:[a-f0-9]{64}$`
	DesiredImage string `json:"desiredImage,omitempty"`
}

// MachineConfigNodeStatus is the node's update as its daemon sees it.
type MachineConfigNodeStatus struct {
	// conditions say how far the node's latest update got: UpdatePrepared,
	// ImagePulledFromRegistry, Cordoned, Drained, AppliedFiles,
	// AppliedOSImage, UpdateExecuted, RebootedNode, UpdateComplete,
	// Updated and NodeDegraded. False: not reached (reason NotRequired:
	// not part of this update); Unknown: in progress; True: done. Each
	// lastTransitionTime changes only with its status.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec this status
	// describes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// configVersion holds the rendered config the node runs and the one
	// its daemon works toward.
	// +optional
	ConfigVersion MachineConfigNodeStatusConfigVersion `json:"configVersion,omitzero"`

	// configImage holds the image the node runs and the one its daemon
	// works toward, both by digest.
	// +optional
	ConfigImage MachineConfigNodeStatusConfigImage `json:"configImage,omitzero"`

	// state is the daemon's state annotation: Done, Working, Rebooting
	// or Degraded.
	// +optional
	// +kubebuilder:validation:Enum=Done;Working;Rebooting;Degraded
	State string `json:"state,omitempty"`

	// reason is the daemon's reason annotation: why the node is Degraded,
	// or what a Done update left alone.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// MachineConfigNodeStatusConfigVersion is the current and desired
// rendered config.
type MachineConfigNodeStatusConfigVersion struct {
	// current is the rendered MachineConfig the node runs (the Node's
	// currentConfig annotation).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Current string `json:"current,omitempty"`
	// desired is the rendered MachineConfig the daemon works toward: the
	// spec's, or, while an update that already rebooted is verified,
	// that update's.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Desired string `json:"desired,omitempty"`
}

// MachineConfigNodeStatusConfigImage is the current and desired image.
type MachineConfigNodeStatusConfigImage struct {
	// currentImage is the image the node runs, by digest (the Node's
	// currentImage annotation: after a live update, the staged image
	// whose configuration the node runs).
	// +optional
	// +kubebuilder:validation:MaxLength=447
	// +kubebuilder:validation:Pattern=`^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*@sha256:[a-f0-9]{64}$`
	CurrentImage string `json:"currentImage,omitempty"`
	// desiredImage is the image the daemon works toward, by digest.
	// +optional
	// +kubebuilder:validation:MaxLength=447
	// +kubebuilder:validation:Pattern=`^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*@sha256:[a-f0-9]{64}$`
	DesiredImage string `json:"desiredImage,omitempty"`
}

// +kubebuilder:object:root=true

// MachineConfigNodeList is a list of MachineConfigNodes.
type MachineConfigNodeList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineConfigNode `json:"items"`
}
