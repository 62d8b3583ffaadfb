package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// MachineConfigPoolSpec selects nodes and MachineConfigs and says how fast
// the pool's nodes may be updated.
type MachineConfigPoolSpec struct {
	// nodeSelector selects the nodes of the pool. A nil selector selects no
	// node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// machineConfigSelector selects the MachineConfigs merged into the
	// pool's rendered configuration. A nil selector selects none.
	// +optional
	MachineConfigSelector *metav1.LabelSelector `json:"machineConfigSelector,omitempty"`

	// paused stops updates to the pool's nodes. Rendering and image builds
	// go on, so that unpausing rolls out the newest configuration.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// maxUnavailable is how many of the pool's nodes may be updating or
	// unavailable at once: an integer of at least 1, or a percentage of the
	// pool's nodes (rounded down, but at least one node). Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",message="maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// drainTimeout bounds how long the rollout controller tries to drain a
	// node (evictions a PodDisruptionBudget refuses are retried) before the
	// node's update fails: it is left cordoned and Degraded, with the pods
	// and budgets that held it in its reason. Defaults to 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// healthCheckTimeout bounds how long a rebooted node may take to boot
	// the desired image and report healthy before it is rolled back.
	// Defaults to 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	HealthCheckTimeout *metav1.Duration `json:"healthCheckTimeout,omitempty"`

	// maxFailedNodes is how many nodes may fail their update to one image
	// before the rollout of that image halts and no further node is taken.
	// A newer image (a fix, or a rollback) starts a new rollout, failed
	// nodes first. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	MaxFailedNodes *int32 `json:"maxFailedNodes,omitempty"`

	// undrainableNodeBehavior says what a drain past drainTimeout does.
	// Fail (the default) fails the node's update: it is left cordoned and
	// Degraded, and counts toward maxFailedNodes. Quarantine leaves the
	// node cordoned, labelled machineconfiguration.strata.dev/drain-blocked
	// and reported with the pods and budgets that block it
	// (drainBlocked annotation), and the rollout goes on with other nodes:
	// a quarantined node counts toward maxBlockedNodes, not maxFailedNodes
	// nor maxUnavailable (its pods still run). The drain is retried every
	// 30 s and the node's update continues as soon as the budgets allow.
	// +optional
	// +kubebuilder:default=Fail
	// +kubebuilder:validation:Enum=Fail;Quarantine
	UndrainableNodeBehavior string `json:"undrainableNodeBehavior,omitempty"`

	// maxBlockedNodes is how many quarantined nodes (undrainableNodeBehavior
	// Quarantine) the rollout goes on beside; with more, no further node
	// is taken until one is drained. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	MaxBlockedNodes *int32 `json:"maxBlockedNodes,omitempty"`

	// maintenanceWindows are the times at which the rollout may start
	// updating a node of the pool. Outside every window no node is sent a
	// new configuration or image; a node already updating finishes. An
	// empty list means always. Windows may overlap; overlapping and
	// adjacent ones act as one.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	MaintenanceWindows []MaintenanceWindow `json:"maintenanceWindows,omitempty"`

	// gates are checked before each node is taken; all must pass.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Gates []RolloutGate `json:"gates,omitempty"`

	// stageAhead is how many nodes beyond those updating download the
	// pool's image in advance, staged locked, so that a node's turn is a
	// drain and a reboot only; the registry then serves at most
	// maxUnavailable + stageAhead nodes at once. 0 (the default) is off.
	// How it combines with the canary: see the Canary type.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	StageAhead *int32 `json:"stageAhead,omitempty"`

	// canary makes a few nodes take each new target first, then soak,
	// before the rest of the pool; see the Canary type.
	// +optional
	Canary *Canary `json:"canary,omitempty"`

	// progressive sends each new target to the pool in steps, each soaked
	// and checked against a success threshold before the next starts; see
	// the ProgressiveRollout type. It applies after the canary, if there
	// is one. Absent, the pool is one step.
	// +optional
	Progressive *ProgressiveRollout `json:"progressive,omitempty"`

	// topology spreads the rollout over groups of nodes that fail
	// together (zones, racks), each with a budget of its own beside
	// maxUnavailable, which still holds across groups; see the
	// RolloutTopology type. Absent, the pool is one group.
	// +optional
	Topology *RolloutTopology `json:"topology,omitempty"`

	// bootstrapToken lets new nodes join the pool through the config
	// server: the controller keeps a bootstrap token for the pool, and the
	// config server serves the pool's first-boot Ignition to a caller that
	// carries it. Absent (the default), the pool takes no new nodes that
	// way: no token exists for it, a token left from before is deleted,
	// and the config server answers 403 for the pool. See the
	// BootstrapToken type for rotation and for where the token must not be
	// readable.
	// +optional
	BootstrapToken *BootstrapToken `json:"bootstrapToken,omitempty"`
}

// BootstrapToken says how a pool's bootstrap token is kept. The token is
// a Secret, strata-config-server/strata-bootstrap-<pool>, made by the
// controller; `stratactl node-config <pool>` prints a pointer config
// that carries it, which a new machine is given as its user data.
//
// Keep the token out of reach of the cluster's pods: on a cloud, the
// user data is served by the instance metadata service
// (169.254.169.254), which every pod on the node can reach unless it is
// blocked, and whoever holds the token gets the pool's first-boot
// config, its node pull secret included. Block pods from the metadata
// service (a NetworkPolicy or the node's firewall dropping egress to
// 169.254.169.254/32; on AWS, IMDSv2 with a hop limit of 1, which
// containers behind a NAT cannot reach), remove the user data once the
// machine has booted where the platform allows it, and set
// rotationPeriod so that a token read later has stopped working.
// RolloutTopology groups a pool's nodes by the value of a node label and
// gives each group a budget. Within a group, and among groups taken at
// once, nodes are taken in the pool's usual turn: unavailable nodes first
// (they cost nothing), then those holding the image staged ahead, then by
// name.
// +kubebuilder:validation:XValidation:rule="!has(self.groups) || self.order == 'Sequential'",message="groups orders a Sequential rollout: set order: Sequential"
type RolloutTopology struct {
	// key is the node label whose value names a node's group, for example
	// topology.kubernetes.io/zone or a rack label. Nodes without the label
	// form one group of their own, taken last in a Sequential rollout.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Key string `json:"key"`

	// maxUnavailable is how many nodes of one group may be unavailable at
	// once: a count, or a percentage of the group's nodes rounded down
	// (at least 1). Absent, a group has no bound of its own.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",message="maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// minAvailable is how many nodes of one group must stay available: a
	// count, or a percentage of the group's nodes rounded up. It is read
	// as at most the group's size less one, so that a group can always
	// give up one node while all its others are available (a group of one
	// node would otherwise never update). Absent, none.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="minAvailable must be an integer of at least 0 or a percentage from 0% to 100%"
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`

	// order is Parallel (the default: every group at once, each within
	// its budget) or Sequential: one group is finished (every node sent
	// the target and none still updating; held nodes aside) before the
	// next starts.
	// +optional
	// +kubebuilder:default=Parallel
	// +kubebuilder:validation:Enum=Parallel;Sequential
	Order string `json:"order,omitempty"`

	// groups orders a Sequential rollout: these label values first, in
	// this order, then the other groups by value, then the nodes without
	// the label.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Groups []string `json:"groups,omitempty"`
}

// ProgressiveRollout is a rollout in steps. A step is done when its nodes
// were all sent the target, none still updates, at least successThreshold
// of the nodes sent so far run it, and its soak is over. Below the
// threshold the rollout of that target halts (Updated=False, reason
// RolloutHalted, naming the step and the failed nodes); a newer target
// starts again from the first step. Steps must grow (each more nodes than
// the one before, counts with counts and percentages with percentages):
// the rollout controller refuses steps out of order with the pool's
// Updated condition (reason InvalidSteps) naming the step, and takes no
// node until they are fixed. (A CEL rule over the list exceeds the API
// server's cost budget for validation.)
type ProgressiveRollout struct {
	// steps are the cumulative sizes of the rollout, in order: after step
	// N, its nodes (a count, or a percentage of the pool rounded up) run
	// the target. The pool's remaining nodes form a last step when the
	// steps stop short of it.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Steps []RolloutStep `json:"steps"`

	// successThreshold is the share of the nodes sent the target so far
	// that must run it for a step to succeed, a percentage. Defaults to
	// 100%.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == string && self.matches('^(100|[1-9]?[0-9])%$')",message="successThreshold must be a percentage from 0% to 100%"
	SuccessThreshold *intstr.IntOrString `json:"successThreshold,omitempty"`
}

// ProgressiveStatus is a progressive rollout's progress.
type ProgressiveStatus struct {
	// step is the current step, from 1, of steps.
	// +optional
	Step int32 `json:"step,omitempty"`
	// steps is how many steps the rollout has (a last step of the whole
	// pool included when spec.progressive's steps stop short of it).
	// +optional
	Steps int32 `json:"steps,omitempty"`
	// phase is Updating, Soaking, Failed (under the success threshold:
	// the rollout halts) or Done.
	// +optional
	// +kubebuilder:validation:Enum=Updating;Soaking;Failed;Done
	Phase string `json:"phase,omitempty"`
	// targetConfig and targetImage are the target the progress is of.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TargetConfig string `json:"targetConfig,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	TargetImage string `json:"targetImage,omitempty"`
	// stepMachineCount is how many nodes run the target once the current
	// step is done; sentMachineCount how many were sent it so far.
	// +optional
	StepMachineCount int32 `json:"stepMachineCount,omitempty"`
	// +optional
	SentMachineCount int32 `json:"sentMachineCount,omitempty"`
	// soakStartedAt and soakUntil are the current step's soak.
	// +optional
	SoakStartedAt *metav1.Time `json:"soakStartedAt,omitempty"`
	// +optional
	SoakUntil *metav1.Time `json:"soakUntil,omitempty"`
}

// RolloutStep is one step of a progressive rollout.
type RolloutStep struct {
	// nodes is how many of the pool's nodes run the target once this step
	// is done, counted from the rollout's start: a count, or a percentage
	// of the pool, rounded up.
	// +required
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",message="nodes must be an integer of at least 1 or a percentage from 1% to 100%"
	Nodes intstr.IntOrString `json:"nodes"`

	// soakTime is how long the pool waits after this step is done before
	// the next starts. Absent or 0s, none.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	SoakTime *metav1.Duration `json:"soakTime,omitempty"`
}

// UndrainableNodeBehavior values.
const (
	UndrainableFail       = "Fail"
	UndrainableQuarantine = "Quarantine"
)

// TopologyOrder values.
const (
	TopologyParallel   = "Parallel"
	TopologySequential = "Sequential"
)

// +kubebuilder:validation:XValidation:rule="!has(self.rotationPeriod) || !has(self.rotationOverlap) || duration(self.rotationOverlap) < duration(self.rotationPeriod)",message="rotationOverlap must be shorter than rotationPeriod"
type BootstrapToken struct {
	// rotationPeriod makes the controller replace the token once it is
	// this old, at least 10m, as a Go duration such as 24h. A token then
	// works for at most rotationPeriod + rotationOverlap after it was
	// made: the config server refuses it after that even if the
	// controller has not replaced it. Absent, the token is replaced only
	// when asked: annotating its Secret with
	// machineconfiguration.strata.dev/rotate replaces it (the replaced
	// token keeps working for rotationOverlap), deleting the Secret
	// replaces it at once (the replaced token stops working at once: the
	// way to revoke a leaked token).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10m')",message="rotationPeriod must be at least 10m"
	RotationPeriod *metav1.Duration `json:"rotationPeriod,omitempty"`

	// rotationOverlap is how long a token replaced by rotation (scheduled,
	// or asked for by the rotate annotation) keeps working beside its
	// successor, so that a machine that read its pointer config just
	// before the rotation still joins; then the config server refuses it.
	// Shorter than rotationPeriod; 0s makes a replaced token stop at once.
	// Defaults to 1h, or to half the rotationPeriod when that is shorter
	// than 2h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	RotationOverlap *metav1.Duration `json:"rotationOverlap,omitempty"`
}

// Weekday is a day of the week.
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// The days of the week.
const (
	Monday    Weekday = "Mon"
	Tuesday   Weekday = "Tue"
	Wednesday Weekday = "Wed"
	Thursday  Weekday = "Thu"
	Friday    Weekday = "Fri"
	Saturday  Weekday = "Sat"
	Sunday    Weekday = "Sun"
)

// MaintenanceWindow opens on each of its days at start (wall-clock time in
// timeZone) for duration (elapsed time). A window belongs to the day it
// starts on, so Sun 22:00 for 4h is open early on Monday. A start that a
// daylight-saving change skips opens at the end of the gap (03:00 for
// 02:30 on a spring-forward day); one that occurs twice opens at the
// first occurrence.
// +kubebuilder:validation:XValidation:rule="duration(self.duration) > duration('0s') && duration(self.duration) <= duration('168h')",message="duration must be more than 0 and at most 168h (a week)"
type MaintenanceWindow struct {
	// days are the days of the week the window opens on, in its time zone.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=7
	Days []Weekday `json:"days"`

	// start is when the window opens, as HH:MM on a 24-hour clock.
	// +required
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`

	// duration is how long the window stays open: more than 0 and at most
	// 168h, as a Go duration such as 4h or 90m.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Duration metav1.Duration `json:"duration"`

	// timeZone is the IANA name of the zone start is read in, such as
	// Europe/Berlin. Defaults to UTC. The controller carries its own
	// time zone database; a name it does not know holds the pool's
	// rollout, with a condition naming the window.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// MaintenanceWindowStatus says whether a pool's maintenance windows are
// open, as of the rollout controller's last look.
type MaintenanceWindowStatus struct {
	// open says whether a window is open.
	// +required
	Open bool `json:"open"`

	// closesAt is when the open window closes; absent when closed, or when
	// the windows chain into each other and never close.
	// +optional
	ClosesAt *metav1.Time `json:"closesAt,omitempty"`

	// nextOpensAt is when a window next opens (after closesAt, while one
	// is open).
	// +optional
	NextOpensAt *metav1.Time `json:"nextOpensAt,omitempty"`
}

// MachineConfigPoolStatusConfiguration names the rendered MachineConfig a
// pool uses and the MachineConfigs it was merged from.
type MachineConfigPoolStatusConfiguration struct {
	// name is the rendered MachineConfig's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// source lists the MachineConfigs merged into it, in merge order.
	// +optional
	// +listType=atomic
	Source []corev1.ObjectReference `json:"source,omitempty"`
}

// MachineConfigPoolStatus is the observed state of a pool.
type MachineConfigPoolStatus struct {
	// observedGeneration is the generation last processed.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// configuration is the rendered configuration the pool's nodes should
	// run.
	// +optional
	Configuration MachineConfigPoolStatusConfiguration `json:"configuration,omitempty"`

	// machineCount is the number of nodes in the pool.
	// +optional
	MachineCount int32 `json:"machineCount,omitempty"`

	// updatedMachineCount is the number of nodes that run the pool's
	// configuration (and image, for a layered pool).
	// +optional
	UpdatedMachineCount int32 `json:"updatedMachineCount,omitempty"`

	// readyMachineCount is the number of updated nodes that are ready.
	// +optional
	ReadyMachineCount int32 `json:"readyMachineCount,omitempty"`

	// unavailableMachineCount is the number of nodes being updated or not
	// ready.
	// +optional
	UnavailableMachineCount int32 `json:"unavailableMachineCount,omitempty"`

	// degradedMachineCount is the number of nodes whose update failed.
	// +optional
	DegradedMachineCount int32 `json:"degradedMachineCount,omitempty"`

	// maintenanceWindow says whether the pool's maintenanceWindows are
	// open and when they next open; absent when the pool has none, or
	// when they cannot be read (see the Updated condition).
	// +optional
	MaintenanceWindow *MaintenanceWindowStatus `json:"maintenanceWindow,omitempty"`

	// newNodes is what a node that joins the pool now starts from: the
	// image its first boot switches to and the rendered config of its
	// /var-bound items. Absent until the pool first has an image to give
	// (the config server serves nothing for the pool until then).
	// +optional
	NewNodes *NewNodeStatus `json:"newNodes,omitempty"`

	// stagedAheadMachineCount is the number of nodes holding the pool's
	// target image staged ahead of their update (spec.stageAhead).
	// +optional
	StagedAheadMachineCount int32 `json:"stagedAheadMachineCount,omitempty"`

	// canary is the canary's progress for the current target; absent
	// when the pool has no canary.
	// +optional
	Canary *CanaryStatus `json:"canary,omitempty"`

	// progressive is where the progressive rollout (spec.progressive) of
	// the current target stands: absent without one.
	// +optional
	Progressive *ProgressiveStatus `json:"progressive,omitempty"`

	// conditions: Updated, Updating, Degraded, NodeDegraded, RenderDegraded,
	// ImageBuildDegraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MachineConfigPool groups nodes that carry the same configuration.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mcp
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=`.status.configuration.name`
// +kubebuilder:printcolumn:name="Updated",type=string,JSONPath=`.status.conditions[?(@.type=="Updated")].status`
// +kubebuilder:printcolumn:name="Updating",type=string,JSONPath=`.status.conditions[?(@.type=="Updating")].status`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`
// +kubebuilder:printcolumn:name="MachineCount",type=integer,JSONPath=`.status.machineCount`
// +kubebuilder:printcolumn:name="ReadyMachineCount",type=integer,JSONPath=`.status.readyMachineCount`
// +kubebuilder:printcolumn:name="UpdatedMachineCount",type=integer,JSONPath=`.status.updatedMachineCount`
// +kubebuilder:printcolumn:name="DegradedMachineCount",type=integer,JSONPath=`.status.degradedMachineCount`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`,priority=1
// +kubebuilder:printcolumn:name="WindowOpen",type=boolean,JSONPath=`.status.maintenanceWindow.open`,priority=1
// +kubebuilder:printcolumn:name="Canary",type=string,JSONPath=`.status.canary.phase`,priority=1
// +kubebuilder:printcolumn:name="StagedAhead",type=integer,JSONPath=`.status.stagedAheadMachineCount`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MachineConfigPool struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec MachineConfigPoolSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status MachineConfigPoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MachineConfigPoolList is a list of MachineConfigPools.
type MachineConfigPoolList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineConfigPool `json:"items"`
}
