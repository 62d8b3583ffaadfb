package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// KernelType selects the kernel a node boots. Empty is allowed because
// OpenShift prints kernelType: "" for a MachineConfig that does not set it.
// +kubebuilder:validation:Enum="";default;realtime;64k-pages
type KernelType string

const (
	// KernelTypeDefault is the base image's own kernel.
	KernelTypeDefault KernelType = "default"
	// KernelTypeRealtime replaces the kernel with the real-time kernel.
	KernelTypeRealtime KernelType = "realtime"
	// KernelType64kPages replaces the kernel with the 64k-pages kernel
	// (aarch64 only).
	KernelType64kPages KernelType = "64k-pages"
)

// RoleLabel on a MachineConfig names the role of the nodes it is for; by
// convention a pool selects the MachineConfigs labelled with its own name
// (machineConfigSelector matchLabels RoleLabel: <pool>). OpenShift's
// machineconfiguration.openshift.io/role plays the same part.
const RoleLabel = Prefix + "role"

// Messages of the rules on the fields a MachineConfig has only so that
// OpenShift's MachineConfigs, as a cluster prints them, are accepted. The
// CRD schema carries them in its CEL rules (markers cannot refer to
// constants; a test checks that the schema says the same); validators
// outside the apiserver (stratactl render) refuse with the same words.
const (
	// FIPSUnsupportedMessage is why spec.fips must be false.
	FIPSUnsupportedMessage = "Strata cannot switch a node into FIPS mode: FIPS mode is set when a node is installed, not by an update; install the nodes in FIPS mode (fips=1 on the kernel command line of the first boot, from a base image with the FIPS crypto policy) and remove fips or set it to false"
	// BaseOSExtensionsContainerImageUnsupportedMessage is why
	// spec.baseOSExtensionsContainerImage must be empty.
	BaseOSExtensionsContainerImageUnsupportedMessage = "Strata installs extensions with dnf from the package repositories of the base image, not from an extensions container; remove baseOSExtensionsContainerImage or leave it empty, and name the extensions to install in spec.extensions"
)

// MachineConfigSpec is a piece of node configuration.
type MachineConfigSpec struct {
	// config is an Ignition config of any 3.x version (3.0 to 3.5). Files,
	// directories, links and systemd units are baked into the image of a
	// layered pool; content bound for /var and users' SSH keys are written
	// on the node by the daemon. Remote sources and disk layout sections are
	// rejected when the pool renders.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Config runtime.RawExtension `json:"config,omitempty"`

	// kernelArguments are appended to the kernel command line, in order.
	// They travel with the image in /usr/lib/bootc/kargs.d. An entry may
	// hold several arguments separated by spaces, as OpenShift reads it;
	// double quotes keep spaces inside one argument (dyndbg="file x.c +p").
	// No control characters (tabs and newlines included).
	// Refused when the pool renders: arguments that boot the node out of
	// its normal system, where no kubelet and no daemon runs to report or
	// roll it back (init=, rdinit=, rd.break, systemd.unit=,
	// rd.systemd.unit=, and the runlevel words emergency, -b, rescue,
	// single, s, S, -s and 1), ostree= (the bootloader entry's own) and
	// "--". rd.shell and the runlevels 2 to 5 are accepted. The kernel
	// keeps only 2048 bytes of its command line (x86_64, aarch64,
	// ppc64le) and a line cut short loses ostree= and does not boot, so
	// the arguments of one MachineConfig, and of all the MachineConfigs
	// of a pool together (with Ignition's
	// kernelArguments.shouldExist), may take at most 1024 bytes, each
	// counted with one space; the rest is left for the base image's
	// arguments and the bootloader's.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:items:Pattern=`^[^\x00-\x1f\x7f]*[^ \x00-\x1f\x7f][^\x00-\x1f\x7f]*$`
	KernelArguments []string `json:"kernelArguments,omitempty"`

	// extensions are OpenShift extension names (ipsec, kerberos,
	// kernel-devel, sandboxed-containers, sysstat, two-node-ha, usbguard,
	// wasm), each installed into the image as its packages; an unknown
	// name is refused when the pool is rendered, with the list of known
	// ones.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=255
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9._+-]*$`
	Extensions []string `json:"extensions,omitempty"`

	// kernelType selects the kernel: default, realtime or 64k-pages. Empty
	// leaves the choice to the other MachineConfigs of the pool, and so
	// does default: as on OpenShift, a non-default kernel asked for by any
	// of the pool's MachineConfigs wins (the last in name order).
	// +optional
	KernelType KernelType `json:"kernelType,omitempty"`

	// osImageURL is the base OS image. When several MachineConfigs of a pool
	// set it, the last one in name order wins. Use a digest for builds that
	// reproduce; a tag is resolved to a digest when a build starts.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	OSImageURL string `json:"osImageURL,omitempty"`

	// fips may only be false. Strata cannot switch a node into FIPS mode:
	// FIPS mode is set when a node is installed (fips=1 on the kernel
	// command line of the first boot, from a base image with the FIPS
	// crypto policy), not by an update. The field exists so that
	// MachineConfigs exported from OpenShift, which say fips: false, are
	// accepted as they are.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!self",message="Strata cannot switch a node into FIPS mode: FIPS mode is set when a node is installed, not by an update; install the nodes in FIPS mode (fips=1 on the kernel command line of the first boot, from a base image with the FIPS crypto policy) and remove fips or set it to false"
	FIPS bool `json:"fips,omitempty"`

	// baseOSExtensionsContainerImage may only be empty. Strata installs
	// extensions with dnf from the package repositories of the base image,
	// not from an extensions container. The field exists so that
	// MachineConfigs exported from OpenShift, which say
	// baseOSExtensionsContainerImage: "", are accepted as they are.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self == ''",message="Strata installs extensions with dnf from the package repositories of the base image, not from an extensions container; remove baseOSExtensionsContainerImage or leave it empty, and name the extensions to install in spec.extensions"
	BaseOSExtensionsContainerImage string `json:"baseOSExtensionsContainerImage,omitempty"`
}

// MachineConfigStatus is the observed state of a MachineConfig.
type MachineConfigStatus struct {
	// observedGeneration is the generation last processed by a controller.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the MachineConfig's state.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MachineConfig is a piece of node configuration: an Ignition config plus
// kernel arguments, extensions and kernel type. Pools select MachineConfigs
// by label and merge them, in name order, into a rendered MachineConfig.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mc
// +kubebuilder:printcolumn:name="Generated By Controller",type=string,JSONPath=`.metadata.annotations.machineconfiguration\.strata\.dev/generated-by-controller`
// +kubebuilder:printcolumn:name="Ignition Version",type=string,JSONPath=`.spec.config.ignition.version`
// +kubebuilder:printcolumn:name="Kernel Type",type=string,JSONPath=`.spec.kernelType`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MachineConfig struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the configuration.
	// +required
	Spec MachineConfigSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status MachineConfigStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MachineConfigList is a list of MachineConfigs.
type MachineConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineConfig `json:"items"`
}
