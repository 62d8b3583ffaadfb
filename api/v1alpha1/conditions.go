package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Condition types of MachineConfigPool.
const (
	// PoolUpdated: every node of the pool runs its current configuration.
	PoolUpdated = "Updated"
	// PoolUpdating: nodes are being updated.
	PoolUpdating = "Updating"
	// PoolDegraded: the pool cannot make progress (any *Degraded below).
	PoolDegraded = "Degraded"
	// PoolNodeDegraded: at least one node failed its update.
	PoolNodeDegraded = "NodeDegraded"
	// PoolRenderDegraded: a selected MachineConfig is invalid, or their
	// merge is too large to store; the pool keeps its last good
	// configuration.
	PoolRenderDegraded = "RenderDegraded"
	// PoolImageBuildDegraded: the newest image build failed; nodes keep
	// the image they run.
	PoolImageBuildDegraded = "ImageBuildDegraded"
)

// Condition types of MachineOSBuild.
const (
	BuildPrepared    = "Prepared"
	BuildBuilding    = "Building"
	BuildSucceeded   = "Succeeded"
	BuildFailed      = "Failed"
	BuildInterrupted = "Interrupted"
	// BuildImageApproved is set by whatever checks a built image (a
	// scanner, CI, stratactl approve/reject), never by Strata: True lets
	// the image roll out to a pool whose MachineOSConfig has
	// imageApproval Required, False keeps it from every node.
	BuildImageApproved = "ImageApproved"
	// BuildImageSigned: the image carries the signature of the
	// MachineOSConfig's signing key (spec.signing). Set by the build
	// controller once the image may roll out (approved, when approval is
	// required); nodes refuse an unsigned image, so the rollout waits.
	BuildImageSigned = "ImageSigned"
	// BuildBootDisk (only when the MachineOSConfig has spec.bootDisk):
	// True once the raw disk of the built image is published
	// (status.bootDisk.artifact); False while it is made (reason
	// BootDiskBuilding) or when it could not be (BootDiskFailed, with
	// the object and field, or the step, that failed). The image rolls
	// out whatever it says.
	BuildBootDisk = "BootDisk"
)

// Condition types of MachineOSConfig.
const (
	// ConfigReady: currentImagePullSpec is the image of the current inputs.
	ConfigReady = "Ready"
	// ConfigDegraded: the inputs cannot be built (unknown pool, missing
	// secret, unreachable base image, invalid content), the newest build
	// failed, or the current image is gone from the registry; nodes keep
	// the image they run.
	ConfigDegraded = "Degraded"
	// ConfigBaseImageVerified (only with spec.baseImageVerification): the
	// base image last resolved carries a signature by one of its keys.
	// False names the field, the tag and the digest that was refused; the
	// pinned base is kept and built on until a resolve verifies.
	ConfigBaseImageVerified = "BaseImageVerified"
)

// Condition reasons.
const (
	ReasonAsExpected       = "AsExpected"
	ReasonInvalidConfig    = "InvalidMachineConfig"
	ReasonConfigTooLarge   = "RenderedConfigTooLarge"
	ReasonRendered         = "Rendered"
	ReasonNoConfigSelected = "NoMachineConfigSelected"
	// ReasonRenderedWithWarnings: the pool rendered, and a MachineConfig
	// holds something OpenShift accepts but ignores (an Ignition 2.x
	// leftover such as filesystem: root); the message names it.
	ReasonRenderedWithWarnings = "RenderedWithWarnings"
	ReasonBuildFailed          = "BuildFailed"
	ReasonBuildSucceeded       = "BuildSucceeded"
	ReasonBuildInterrupted     = "BuildInterrupted"
	ReasonBuildRunning         = "BuildRunning"
	ReasonBuildPending         = "BuildPending"
	// ReasonRetrying: a step failed in a way that may heal by itself (a
	// registry or the API server did not answer); the message says what
	// failed and when it is tried next.
	ReasonRetrying         = "Retrying"
	ReasonUnknownPool      = "UnknownPool"
	ReasonPoolConflict     = "PoolAlreadyLayered"
	ReasonNoRenderedConfig = "WaitingForRenderedConfig"
	ReasonMissingSecret    = "MissingSecret"
	ReasonInvalidSecret    = "InvalidSecret"
	ReasonNoBaseImage      = "NoBaseImage"
	ReasonBaseUnreachable  = "BaseImageUnreachable"
	ReasonInvalidInput     = "InvalidInput"
	ReasonInputsChanged    = "InputsChanged"
	// ReasonCurrentImageMissing: the image the MachineOSConfig's nodes are
	// to run is gone from the registry; it is not rebuilt unless asked.
	ReasonCurrentImageMissing = "CurrentImageMissing"
	// ReasonBaseOverridesOSImageURL: the MachineOSConfig's
	// baseImagePullSpec is built on in place of a MachineConfig's
	// osImageURL, which OpenShift would build on; the message names that
	// MachineConfig. A reason of Degraded=False on the MachineOSConfig and
	// of ImageBuildDegraded=False on its pool: the build proceeds.
	ReasonBaseOverridesOSImageURL = "BaseImageOverridesOSImageURL"

	// Rollout reasons (pool conditions Updated, Updating, NodeDegraded).
	ReasonAllNodesUpdated   = "AllNodesUpdated"
	ReasonRollingOut        = "RollingOut"
	ReasonPaused            = "Paused"
	ReasonWaitingForImage   = "WaitingForImage"
	ReasonRolloutHalted     = "RolloutHalted"
	ReasonNodesDegraded     = "NodesDegraded"
	ReasonNodeConflict      = "NodeInSeveralPools"
	ReasonImageOnlyContent  = "ImageOnlyContentIgnored"
	ReasonNoNodes           = "NoNodes"
	ReasonWaitingForDaemons = "WaitingForDaemons"
	// ReasonOutsideMaintenanceWindow: nodes are to be updated, but none
	// of the pool's maintenanceWindows is open; the message says when the
	// next opens.
	ReasonOutsideMaintenanceWindow = "OutsideMaintenanceWindow"
	// ReasonInvalidMaintenanceWindow: a maintenanceWindow cannot be read
	// (a time zone the controller does not know); no node is taken until
	// it is fixed. The message names the field.
	ReasonInvalidMaintenanceWindow = "InvalidMaintenanceWindow"

	// Approval reasons: of ImageApproved (stratactl writes these; a
	// scanner may write its own), and of a pool's Updated condition while
	// the gate holds its nodes.
	ReasonApproved              = "Approved"
	ReasonRejected              = "Rejected"
	ReasonAwaitingImageApproval = "AwaitingImageApproval"
	ReasonImageRejected         = "ImageRejected"

	// Signing reasons: of ImageSigned, of a pool's Updated condition while
	// its image waits for the signature, and of a MachineOSConfig whose
	// base image's signature does not verify.
	ReasonSigned                 = "Signed"
	ReasonSigningFailed          = "SigningFailed"
	ReasonAwaitingImageSignature = "AwaitingImageSignature"
	ReasonBaseImageNotVerified   = "BaseImageNotVerified"
	ReasonBaseImageVerified      = "BaseImageVerified"

	// Boot disk reasons, of a build's BootDisk condition.
	ReasonBootDiskBuilding  = "BootDiskBuilding"
	ReasonBootDiskPublished = "BootDiskPublished"
	ReasonBootDiskFailed    = "BootDiskFailed"
)

// Annotation and label keys, all under the Strata prefix.
const (
	// Prefix is the prefix of every Strata annotation and label.
	Prefix = "machineconfiguration.strata.dev/"

	// GeneratedByControllerAnnotation marks a rendered MachineConfig; its
	// value is the controller's version.
	GeneratedByControllerAnnotation = Prefix + "generated-by-controller"
	// SourceMachineConfigsAnnotation on a rendered MachineConfig lists the
	// MachineConfigs merged into it, comma separated, in merge order.
	SourceMachineConfigsAnnotation = Prefix + "source-machine-configs"
	// PoolLabel on a rendered MachineConfig or a MachineOSBuild names its
	// pool.
	PoolLabel = Prefix + "pool"
	// RebuildAnnotation on a MachineOSConfig forces a new build of the
	// same inputs; the controller removes it once the build is made.
	RebuildAnnotation = Prefix + "rebuild"
	// ResolveBaseAnnotation on a MachineOSConfig makes the controller
	// resolve the base image's tag again now, instead of at the next
	// interval; the controller removes it.
	ResolveBaseAnnotation = Prefix + "resolve-base"
	// InterruptAnnotation on a MachineOSBuild asks that the build stop:
	// its inputs are no longer the MachineOSConfig's, and its value names
	// the build that replaces it. The MachineOSConfig's controller sets it
	// and takes it off when the build's inputs are current again; the
	// MachineOSBuild's controller then stops the build (Interrupted), or
	// starts an interrupted one again as a new attempt.
	InterruptAnnotation = Prefix + "interrupt"
	// CreatedAnnotation on a rendered MachineConfig or a MachineOSBuild
	// records when the controller made it, to the nanosecond (RFC 3339):
	// creationTimestamp has one-second resolution, and history must order
	// objects made within a second too.
	CreatedAnnotation = Prefix + "created"
	// LayeredByAnnotation on a MachineConfigPool names the one
	// MachineOSConfig that layers it.
	LayeredByAnnotation = Prefix + "layered-by"
	// MachineOSConfigLabel on a MachineOSBuild, its Job, input Secret and pod
	// names the MachineOSConfig it builds.
	MachineOSConfigLabel = Prefix + "machineosconfig"

	// Node annotations: the protocol between the rollout controller and
	// the daemon. Each has one writer.
	//
	// Written by the rollout controller: desiredConfig (a rendered
	// MachineConfig's name), desiredImage (repo@sha256:..., the only form
	// nodes pull), imagePullSecret (the name of the MachineOSConfig's
	// renderedImagePullSecret, whose copy in strata-nodes the daemon
	// writes to /run/ostree/auth.json; absent: none), healthCheckTimeout
	// (a Go duration), pool (the pool that owns the node),
	// lastAppliedDrain (the drain or uncordon request last carried out),
	// drainFailure, drainStarted and cordonedFor.
	//
	// Written by the daemon (and only these; config/policy refuses it the
	// others): currentConfig, currentImage (from bootc status),
	// originalImage (the image the node booted before Strata first
	// changed it: where a pool without a MachineOSConfig goes back to),
	// state, reason, desiredDrain ("drain-<key>" asks the controller to
	// cordon and drain the node, "uncordon-<key>" to uncordon it; <key>
	// names the update, so a request is carried out once) and disruption
	// (what the node's latest image update costs it and why: "<Live,
	// SoftReboot or Reboot>: <reason>", from the MachineConfiguration's
	// policy), bootedImage (the image the node booted, set only while it
	// differs from currentImage: after a live apply currentImage is the
	// staged image whose configuration the node runs, and the booted one
	// must stay in the registry too).
	//
	// Staging ahead adds desiredStage and desiredStageConfig (the
	// controller's), stagedImage and stagedLive (the daemon's); see
	// rollout_types.go.
	//
	// state and reason have the daemon as their one writer: a drain that
	// runs past the pool's drainTimeout is the controller's verdict in
	// drainFailure, which the daemon reports as state=Degraded with its
	// reason.
	CurrentConfigAnnotation      = Prefix + "currentConfig"
	DesiredConfigAnnotation      = Prefix + "desiredConfig"
	CurrentImageAnnotation       = Prefix + "currentImage"
	DesiredImageAnnotation       = Prefix + "desiredImage"
	OriginalImageAnnotation      = Prefix + "originalImage"
	ImagePullSecretAnnotation    = Prefix + "imagePullSecret"
	HealthCheckTimeoutAnnotation = Prefix + "healthCheckTimeout"
	NodePoolAnnotation           = Prefix + "pool"
	StateAnnotation              = Prefix + "state"
	ReasonAnnotation             = Prefix + "reason"
	DesiredDrainAnnotation       = Prefix + "desiredDrain"
	LastAppliedDrainAnnotation   = Prefix + "lastAppliedDrain"
	DisruptionAnnotation         = Prefix + "disruption"
	BootedImageAnnotation        = Prefix + "bootedImage"
	// DrainFailureAnnotation, written by the drain controller and read by
	// the daemon, records the drain request the controller gave up on,
	// past the pool's drainTimeout, and why: "<request>: <reason>"
	// (DrainFailure), the node left cordoned. The daemon reports it as
	// state=Degraded with the reason, for the drain it asked for only: a
	// verdict naming another request is ignored, and the controller
	// removes it when it carries out any other request. A person removes
	// it to have the drain tried again. A node an older controller gave
	// up on has none, but state=Degraded with the drain still asked for,
	// which both sides still read as the same verdict.
	DrainFailureAnnotation = Prefix + "drainFailure"
	// DrainBlockedAnnotation, written by the drain controller in a pool
	// whose undrainableNodeBehavior is Quarantine, records a drain
	// request past the pool's drainTimeout that the controller keeps
	// trying, and what blocks it: "<request>: <pods and budgets>" (the
	// DrainFailure form). The node is cordoned and carries
	// DrainBlockedLabel; the rollout planner counts it toward
	// maxBlockedNodes. Both go when the drain is carried out, or the
	// request changes.
	DrainBlockedAnnotation = Prefix + "drainBlocked"
	// DrainBlockedLabel ("true") marks a quarantined node, for selectors
	// and alerts: kubectl get nodes -l machineconfiguration.strata.dev/drain-blocked.
	DrainBlockedLabel = Prefix + "drain-blocked"
	// DrainStartedAnnotation records when the controller first cordoned
	// the node for the current drain request (RFC 3339, to the nanosecond), so that the
	// drain timeout survives a restart of the controller.
	DrainStartedAnnotation = Prefix + "drainStarted"
	// CordonedForAnnotation, written by the controller, records that it
	// cordoned the node itself, and for which update (the <key> of the
	// drain request). The controller uncordons only a node with this
	// record: one cordoned by someone else (a person's quarantine) stays
	// cordoned whatever the daemon asks.
	CordonedForAnnotation = Prefix + "cordonedFor"
)

// UpdateKey names an update in the drain handshake (the <key> of
// desiredDrain's "drain-<key>" and "uncordon-<key>"): the first 16 hex
// characters of sha256(image + "\n" + config), from the node's
// desiredImage and desiredConfig. The daemon and the controller both
// derive it, so it is defined once here.
func UpdateKey(image, config string) string {
	sum := sha256.Sum256([]byte(image + "\n" + config))
	return hex.EncodeToString(sum[:])[:16]
}

// Prefixes of the desiredDrain and lastAppliedDrain values.
const (
	DrainRequestPrefix    = "drain-"
	UncordonRequestPrefix = "uncordon-"
)

// DrainFailure is the drainFailure value for drain request request (its
// "drain-<key>") given up on for reason. The controller writes it and
// the daemon parses it (ParseDrainFailure), so its form is defined once
// here.
func DrainFailure(request, reason string) string {
	return request + drainFailureSeparator + reason
}

// ParseDrainFailure splits a drainFailure value into the drain request
// it names and the reason; ok is false for a value of another form.
func ParseDrainFailure(value string) (request, reason string, ok bool) {
	request, reason, ok = strings.Cut(value, drainFailureSeparator)
	if !ok || !strings.HasPrefix(request, DrainRequestPrefix) {
		return "", "", false
	}
	return request, reason, true
}

// drainFailureSeparator ends the request in a drainFailure value; no
// request holds it.
const drainFailureSeparator = ": "

// Values of the node state annotation.
const (
	NodeStateDone      = "Done"
	NodeStateWorking   = "Working"
	NodeStateRebooting = "Rebooting"
	NodeStateDegraded  = "Degraded"
)

// ConfigLayerCreatedBy starts the history entry (created_by) of the
// configuration layer that Strata appends to an admin stage: the daemon
// knows by it that the layers below are the base and the admin stage.
const ConfigLayerCreatedBy = "strata: configuration of "

// Gate reasons, of a pool's Updated and Updating conditions (see
// gates_types.go).
const (
	// ReasonHeldByGate: nodes are to be updated, but a gate holds them:
	// the message names the gate and says why.
	ReasonHeldByGate = "HeldByGate"
	// ReasonDrainsBlocked: more nodes are quarantined with a blocked
	// drain than the pool's maxBlockedNodes: no other node is taken until
	// one is drained; the message names them and what blocks them.
	ReasonDrainsBlocked = "DrainsBlocked"
	// ReasonInvalidGate: a gate cannot be read (a regular expression or
	// CEL expression that does not compile); no node is taken until it is
	// fixed. The message names the field.
	ReasonInvalidGate = "InvalidGate"
	// ReasonInvalidSteps: spec.progressive's steps do not grow; no node is
	// taken until they are fixed. The message names the step.
	ReasonInvalidSteps = "InvalidSteps"
)
