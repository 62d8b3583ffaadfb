package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Canary makes a few of a pool's nodes take each new target first: they
// update (at most maxUnavailable at a time), then the pool soaks for
// soakTime with nothing else taken, then the rest of the pool follows.
// A node of the canary that fails the target, during its update or the
// soak, halts the rollout as maxFailedNodes does (see the MachineConfigPool
// docs). A target that every node runs already takes no canary.
//
// How the rollout's knobs combine, for one pool and one target (a
// rendered config and image):
//
//   - maxUnavailable bounds the nodes updating at once in every phase,
//     the canary's included: a canary of 3 nodes with maxUnavailable 1
//     updates them one at a time.
//   - maintenanceWindows: no node, canary or not, starts its update
//     outside a window. The soak is elapsed time and runs whether a
//     window is open or not; after it, the rest of the pool waits for a
//     window as usual.
//   - paused holds every node; the soak's clock keeps running.
//   - maxFailedNodes: during the canary and its soak, a single node
//     failing the target (Degraded: its update failed, it rolled back)
//     halts the rollout, whatever maxFailedNodes says; after the soak,
//     maxFailedNodes applies. A halt is the same halt in both cases
//     (Updated reason RolloutHalted, no further node taken), and a new
//     target (a fix, or a rollback) starts a new canary.
//   - stageAhead: the nodes that the rollout would take next (the rest
//     of the canary while it updates; the first of the others while it
//     soaks, so that they start at once when it ends) download the image
//     ahead, locked. Not while the pool is paused or halted, nor while
//     its target is not known; outside a maintenance window, yes (a
//     download disrupts nothing, and the window is then spent on drains
//     and reboots).
//
// +kubebuilder:validation:XValidation:rule="has(self.count) != has(self.nodeSelector)",message="canary needs exactly one of count and nodeSelector"
// +kubebuilder:validation:XValidation:rule="duration(self.soakTime) >= duration('0s') && duration(self.soakTime) <= duration('720h')",message="soakTime must be from 0s to 720h (30 days)"
type Canary struct {
	// count makes the canary the pool's first count nodes in name order
	// (the order in which the rollout takes nodes). A pool with no more
	// nodes than count is all canary.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Count *int32 `json:"count,omitempty"`

	// nodeSelector makes the canary the pool's nodes that it selects. A
	// selector that selects none of the pool's nodes makes the canary
	// empty: the soak starts at once.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// soakTime is how long the pool waits once every canary node runs the
	// target (and is Done) before any other node is taken, as a Go
	// duration such as 30m or 24h: from 0s to 720h.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	SoakTime metav1.Duration `json:"soakTime"`
}

// CanaryPhase is where a pool's canary is for the current target.
// +kubebuilder:validation:Enum=Updating;Soaking;Done
type CanaryPhase string

// Canary phases.
const (
	// CanaryUpdating: the canary's nodes are being updated; no other
	// node is taken.
	CanaryUpdating CanaryPhase = "Updating"
	// CanarySoaking: every canary node runs the target; no other node
	// is taken until soakUntil.
	CanarySoaking CanaryPhase = "Soaking"
	// CanaryDone: the soak is over (or nothing is left to take after the
	// canary); the rest of the pool is taken as usual.
	CanaryDone CanaryPhase = "Done"
)

// CanaryStatus is the canary's progress for the pool's current target.
type CanaryStatus struct {
	// phase is Updating, Soaking or Done.
	// +required
	Phase CanaryPhase `json:"phase"`

	// targetConfig is the rendered config of the target the canary is
	// for.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TargetConfig string `json:"targetConfig,omitempty"`

	// targetImage is the image of the target the canary is for; empty
	// when the target is each node's original image.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	TargetImage string `json:"targetImage,omitempty"`

	// machineCount is the number of nodes in the canary.
	// +optional
	MachineCount int32 `json:"machineCount,omitempty"`

	// updatedMachineCount is the number of canary nodes that run the
	// target.
	// +optional
	UpdatedMachineCount int32 `json:"updatedMachineCount,omitempty"`

	// soakStartedAt is when the rollout controller first saw every canary
	// node run the target: the soak counts from there.
	// +optional
	SoakStartedAt *metav1.Time `json:"soakStartedAt,omitempty"`

	// soakUntil is when the soak ends: soakStartedAt + soakTime.
	// +optional
	SoakUntil *metav1.Time `json:"soakUntil,omitempty"`
}

// Rollout reasons of a pool's Updated and Updating conditions for its
// canary.
const (
	// ReasonCanaryUpdating: the canary's nodes are being updated; the
	// others wait.
	ReasonCanaryUpdating = "CanaryUpdating"
	// ReasonCanarySoaking: the canary runs the target; the others wait
	// until the time the message gives.
	ReasonCanarySoaking = "CanarySoaking"
)

// Node annotations for staging ahead, in the protocol between the rollout
// controller and the daemon (see the other keys in conditions.go).
const (
	// DesiredStageAnnotation, written by the rollout controller, asks a
	// node that is not updating to download an image (repo@sha256:...)
	// ahead of its update and stage it locked (bootc switch
	// --download-only): no reboot, planned or not, boots it, and when the
	// node's turn comes its update finds the image staged and does not
	// download it again. The controller sets it on at most the pool's
	// stageAhead nodes at a time and removes it when it takes the node,
	// or when the node is no longer one of the next to take.
	DesiredStageAnnotation = Prefix + "desiredStage"
	// StagedImageAnnotation, written by the daemon, is the image it
	// downloaded ahead and holds staged locked, while that is not the
	// node's desired image; absent otherwise. A daemon whose bootc cannot
	// stage locked (switch --download-only) does not stage ahead, and
	// says so in an Event.
	StagedImageAnnotation = Prefix + "stagedImage"
	// DesiredStageConfigAnnotation, written by the rollout controller
	// beside desiredStage, is the rendered config the node's update will
	// take with that image: the daemon decides the update's disruption as
	// soon as the image is staged ahead, against the config it runs.
	DesiredStageConfigAnnotation = Prefix + "desiredStageConfig"
	// StagedLiveAnnotation, written by the daemon, is the update key
	// (UpdateKey of desiredStage and desiredStageConfig) of the update it
	// holds staged ahead and decided Live without a drain: applied, it
	// will not cordon, drain, reboot or take the node out of Ready.
	// The rollout controller takes such a node without counting it
	// against maxUnavailable. Absent otherwise.
	StagedLiveAnnotation = Prefix + "stagedLive"
	// HoldAnnotation, written by an admin, keeps the rollout away from
	// the node; its value is the reason (required: an empty value holds
	// nothing). A held node is not sent a new target nor asked to stage
	// ahead, and is listed with its reason in the pool's Updated
	// condition; it does not count as failed, and the rest of the pool
	// goes on. A node already sent its target when the hold is set
	// finishes that update. Removing the annotation releases it.
	HoldAnnotation = Prefix + "hold"
)
