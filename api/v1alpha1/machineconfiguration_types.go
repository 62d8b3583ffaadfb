package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachineConfigurationName is the name of the one MachineConfiguration a
// cluster has, as on OpenShift.
const MachineConfigurationName = "cluster"

// Condition type and reason of MachineConfiguration.
const (
	// MachineConfigurationPolicyMerged: status.nodeDisruptionPolicyStatus
	// holds the merge of the built-in defaults and this generation's
	// spec.nodeDisruptionPolicy.
	MachineConfigurationPolicyMerged = "NodeDisruptionPolicyMerged"
	// ReasonPolicyMerged: the merged policy was written.
	ReasonPolicyMerged = "Merged"
)

// NodeDisruptionPolicyActionType is what a node does for a change a policy
// names.
// +kubebuilder:validation:Enum=Reboot;SoftReboot;Drain;Reload;Restart;DaemonReload;None
type NodeDisruptionPolicyActionType string

const (
	// RebootAction drains the node and reboots it into the new image.
	RebootAction NodeDisruptionPolicyActionType = "Reboot"
	// SoftRebootAction drains the node and soft-reboots it into the new
	// image (systemd restarts userspace, the kernel stays), or reboots it
	// when bootc reports the new deployment not soft-reboot capable.
	// Strata's addition to OpenShift's actions.
	SoftRebootAction NodeDisruptionPolicyActionType = "SoftReboot"
	// DrainAction drains the node, applies the change live and uncordons
	// it, without a reboot.
	DrainAction NodeDisruptionPolicyActionType = "Drain"
	// ReloadAction reloads reload.serviceName (systemctl reload).
	ReloadAction NodeDisruptionPolicyActionType = "Reload"
	// RestartAction restarts restart.serviceName (systemctl restart).
	RestartAction NodeDisruptionPolicyActionType = "Restart"
	// DaemonReloadAction makes systemd read its unit files again
	// (systemctl daemon-reload).
	DaemonReloadAction NodeDisruptionPolicyActionType = "DaemonReload"
	// NoneAction applies the change live and does nothing else.
	NoneAction NodeDisruptionPolicyActionType = "None"
)

// NodeDisruptionPolicyServiceName is a systemd unit name, ${NAME}${TYPE}:
// the name of letters, digits, ":", "-", "_", ".", "\", and the type one
// of .service, .socket, .device, .mount, .automount, .swap, .target,
// .path, .timer, .snapshot, .slice or .scope. OpenShift's rules, with its
// messages.
// +kubebuilder:validation:MaxLength=255
// +kubebuilder:validation:XValidation:rule=`self.matches('\\.(service|socket|device|mount|automount|swap|target|path|timer|snapshot|slice|scope)$')`,message="Invalid ${SERVICETYPE} in service name. Expected format is ${NAME}${SERVICETYPE}, where ${SERVICETYPE} must be one of \".service\", \".socket\", \".device\", \".mount\", \".automount\", \".swap\", \".target\", \".path\", \".timer\",\".snapshot\", \".slice\" or \".scope\"."
// +kubebuilder:validation:XValidation:rule=`self.matches('^[a-zA-Z0-9:._\\\\-]+\\..')`,message="Invalid ${NAME} in service name. Expected format is ${NAME}${SERVICETYPE}, where {NAME} must be atleast 1 character long and can only consist of alphabets, digits, \":\", \"-\", \"_\", \".\", and \"\\\""
type NodeDisruptionPolicyServiceName string

// NodeDisruptionPolicyService names the unit a Reload or Restart acts on.
type NodeDisruptionPolicyService struct {
	// serviceName is the unit's full name, such as chronyd.service.
	// +required
	ServiceName NodeDisruptionPolicyServiceName `json:"serviceName"`
}

// NodeDisruptionPolicyAction is one action of a policy.
//
// +kubebuilder:validation:XValidation:rule="has(self.type) && self.type == 'Reload' ? has(self.reload) : !has(self.reload)",message="reload is required when type is Reload, and forbidden otherwise"
// +kubebuilder:validation:XValidation:rule="has(self.type) && self.type == 'Restart' ? has(self.restart) : !has(self.restart)",message="restart is required when type is Restart, and forbidden otherwise"
type NodeDisruptionPolicyAction struct {
	// type is the action: Reboot, SoftReboot, Drain, Reload, Restart,
	// DaemonReload or None. Reload and Restart name their unit in reload
	// or restart.
	// +required
	Type NodeDisruptionPolicyActionType `json:"type"`

	// reload names the unit to reload; only with type Reload.
	// +optional
	Reload *NodeDisruptionPolicyService `json:"reload,omitempty"`

	// restart names the unit to restart; only with type Restart.
	// +optional
	Restart *NodeDisruptionPolicyService `json:"restart,omitempty"`
}

// NodeDisruptionPolicyFile is what a change of a file, or of anything under
// a directory, costs a node.
type NodeDisruptionPolicyFile struct {
	// path is an absolute path. It names a changed file when it is the
	// file's path or a directory above it; of several policies that name
	// a file, the one with the longest path applies.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="path must be an absolute path, such as /etc/chrony.conf"
	Path string `json:"path"`

	// actions are run in order when a file this policy names changes.
	// Reboot, SoftReboot and None stand alone. At most 10.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:XValidation:rule="self.exists(x, x.type=='Reboot') ? size(self) == 1 : true",message="Reboot action can only be specified standalone, as it will override any other actions"
	// +kubebuilder:validation:XValidation:rule="self.exists(x, x.type=='SoftReboot') ? size(self) == 1 : true",message="SoftReboot action can only be specified standalone, as it will override any other actions"
	// +kubebuilder:validation:XValidation:rule="self.exists(x, x.type=='None') ? size(self) == 1 : true",message="None action can only be specified standalone, as it will override any other actions"
	Actions []NodeDisruptionPolicyAction `json:"actions"`
}

// NodeDisruptionPolicyUnit is what a change of a systemd unit (its
// contents, drop-ins, enabled or mask) costs a node.
type NodeDisruptionPolicyUnit struct {
	// name is the unit's full name, such as chronyd.service; it matches
	// exactly.
	// +required
	Name NodeDisruptionPolicyServiceName `json:"name"`

	// actions are run in order when the unit changes. Reboot, SoftReboot
	// and None stand alone. At most 10.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:XValidation:rule="self.exists(x, x.type=='Reboot') ? size(self) == 1 : true",message="Reboot action can only be specified standalone, as it will override any other actions"
	// +kubebuilder:validation:XValidation:rule="self.exists(x, x.type=='SoftReboot') ? size(self) == 1 : true",message="SoftReboot action can only be specified standalone, as it will override any other actions"
	// +kubebuilder:validation:XValidation:rule="self.exists(x, x.type=='None') ? size(self) == 1 : true",message="None action can only be specified standalone, as it will override any other actions"
	Actions []NodeDisruptionPolicyAction `json:"actions"`
}

// NodeDisruptionPolicySSHKey is what a change of any user's SSH keys costs
// a node.
type NodeDisruptionPolicySSHKey struct {
	// actions are run in order when SSH keys change; empty keeps the
	// default (None). Reboot, SoftReboot and None stand alone. At most 10.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:XValidation:rule="self.exists(x, x.type=='Reboot') ? size(self) == 1 : true",message="Reboot action can only be specified standalone, as it will override any other actions"
	// +kubebuilder:validation:XValidation:rule="self.exists(x, x.type=='SoftReboot') ? size(self) == 1 : true",message="SoftReboot action can only be specified standalone, as it will override any other actions"
	// +kubebuilder:validation:XValidation:rule="self.exists(x, x.type=='None') ? size(self) == 1 : true",message="None action can only be specified standalone, as it will override any other actions"
	Actions []NodeDisruptionPolicyAction `json:"actions,omitempty"`
}

// NodeDisruptionPolicyConfig is the administrator's policy: what a change
// of a file, a unit or SSH keys costs a node.
type NodeDisruptionPolicyConfig struct {
	// files are policies for file paths, one per path. At most 50.
	// +optional
	// +listType=map
	// +listMapKey=path
	// +kubebuilder:validation:MaxItems=50
	Files []NodeDisruptionPolicyFile `json:"files,omitempty"`

	// units are policies for systemd units, one per name. At most 50.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=50
	Units []NodeDisruptionPolicyUnit `json:"units,omitempty"`

	// sshkey is the policy for changes of users' SSH keys.
	// +optional
	SSHKey NodeDisruptionPolicySSHKey `json:"sshkey,omitzero"`
}

// NodeDisruptionPolicyClusterStatus is the policy in effect: Strata's
// defaults merged with the administrator's.
type NodeDisruptionPolicyClusterStatus struct {
	// files are the file policies in effect, defaults first.
	// +optional
	// +listType=map
	// +listMapKey=path
	// +kubebuilder:validation:MaxItems=100
	Files []NodeDisruptionPolicyFile `json:"files,omitempty"`

	// units are the unit policies in effect, defaults first.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	Units []NodeDisruptionPolicyUnit `json:"units,omitempty"`

	// sshkey is the SSH key policy in effect.
	// +optional
	SSHKey NodeDisruptionPolicySSHKey `json:"sshkey,omitzero"`
}

// NodeDisruptionPolicyStatus holds the policy in effect.
type NodeDisruptionPolicyStatus struct {
	// clusterPolicies is the merge of Strata's defaults and
	// spec.nodeDisruptionPolicy: a policy of the spec replaces a default
	// of the same path or unit name, and an SSH key policy with actions
	// replaces the default one.
	// +optional
	ClusterPolicies NodeDisruptionPolicyClusterStatus `json:"clusterPolicies,omitzero"`
}

// MachineConfigurationSpec holds cluster-wide settings of node updates.
type MachineConfigurationSpec struct {
	// nodeDisruptionPolicy says what a configuration change costs a node,
	// per file path, unit and for SSH keys, in OpenShift's shape: an
	// OpenShift policy applies as written. See the MachineConfiguration
	// kind for how a node's update is decided.
	// +optional
	NodeDisruptionPolicy NodeDisruptionPolicyConfig `json:"nodeDisruptionPolicy,omitzero"`
}

// MachineConfigurationStatus is the observed state of the
// MachineConfiguration.
type MachineConfigurationStatus struct {
	// observedGeneration is the generation the status was computed from.
	// Nodes use nodeDisruptionPolicyStatus only when it equals
	// metadata.generation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: NodeDisruptionPolicyMerged.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// nodeDisruptionPolicyStatus is the policy nodes follow.
	// +optional
	NodeDisruptionPolicyStatus NodeDisruptionPolicyStatus `json:"nodeDisruptionPolicyStatus,omitzero"`
}

// MachineConfiguration holds the cluster's node disruption policy. There
// is one, named cluster; without it nodes follow the defaults.
//
// How a node's update is decided. The node's daemon decides once the
// desired image is staged, and shows the decision and its reason in the
// node's disruption annotation, an Event and `stratactl status`. It
// compares its current rendered configuration and image with the desired
// ones:
//
//   - A full reboot, always: a new base image, a new admin stage (the
//     MachineOSConfig's containerFile), a changed kernelType, extensions,
//     kernel arguments (a file of /usr/lib/bootc/kargs.d included) or
//     osImageURL. bootc does not notice a change of kernel arguments in
//     the image when it soft-reboots, so Strata never relies on it. No
//     policy changes this.
//   - Otherwise the change is confined to the configuration layer, and
//     each changed item takes the policy that names it: a file by the
//     policy with the longest path that equals it or is a directory above
//     it, a unit by its exact name, SSH keys by sshkey. The strongest
//     action of all changed items decides the node's update: Reboot, then
//     SoftReboot, then Drain, then the live actions (Reload, Restart,
//     DaemonReload, None), which run without a reboot, DaemonReload first,
//     each once. A unit change, or a file changed under
//     /etc/systemd/system, adds a DaemonReload: systemd must read the
//     unit again before anything else sees it.
//   - A changed item no policy names takes the default: a soft reboot
//     when bootc reports the staged deployment soft-reboot capable, and a
//     full reboot otherwise (so does a SoftReboot action). A soft reboot
//     drains the node first, as a reboot does.
//   - Only /etc and /var can be written on a running node. A changed
//     file of the image outside /etc (under /usr, for example) takes the
//     default even when a policy names it, unless that policy says Reboot.
//   - Content bound for /var (and /home, /root, /srv, /opt, /mnt, /media,
//     /usr/local) and SSH keys are written by the daemon on the node, the
//     same way with or without a reboot: unless a policy names them, they
//     cost nothing (None).
//
// Defaults (status lists them, and a policy of the spec for the same path
// replaces one): None for /var/lib/kubelet/config.json (the kubelet
// reads it at each pull), /etc/containers/policy.json,
// /etc/containers/registries.conf, /etc/containers/registries.conf.d and
// /etc/containers/registries.d (bootc, podman and skopeo read them at
// each pull), and for SSH keys. CRI-O reads the containers files only
// when it starts or reloads: on CRI-O nodes add Reload crio.service for
// them, as OpenShift's defaults do.
//
// What the daemon does with the decision: a live one (no reboot) writes
// the changed /etc files exactly as the new image has them and runs the
// actions, with the new image staged for the next boot; the node then
// reports the new configuration and image as current and the image it
// booted in its bootedImage annotation. A live apply that fails (a write
// refused, an action that fails) takes a full reboot instead, saying why.
// A soft reboot decision drains the node, soft-reboots it and checks its
// health as after a reboot; bootc refusing the soft reboot takes a full
// one instead.
//
// In a pool with stageAhead, a node staging its update ahead decides as
// soon as the image is staged, against the configuration it runs then,
// and its update then skips the decision, unless by its turn the node
// runs another configuration or this policy changed: then it decides
// again, under the policy in force. A live decision without a drain
// also makes the update cost no capacity: the rollout takes the node
// beyond maxUnavailable, as long as fewer than maxUnavailable +
// stageAhead of the pool's nodes are unavailable.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'cluster'",message="a MachineConfiguration must be named cluster: the cluster has one"
// +kubebuilder:printcolumn:name="Merged",type=string,JSONPath=`.status.conditions[?(@.type=="NodeDisruptionPolicyMerged")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MachineConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +optional
	Spec MachineConfigurationSpec `json:"spec,omitzero"`

	// status is the observed state.
	// +optional
	Status MachineConfigurationStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// MachineConfigurationList is a list of MachineConfigurations.
type MachineConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineConfiguration `json:"items"`
}
