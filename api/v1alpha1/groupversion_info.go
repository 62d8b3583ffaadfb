// Package v1alpha1 holds the Strata API: MachineConfig, MachineConfigPool,
// MachineOSConfig, MachineOSBuild, MachineConfiguration and MachineConfigNode in the group
// machineconfiguration.strata.dev. It keeps the object model of OpenShift's
// Machine Config Operator so its users feel at home. The package holds types,
// validation markers and constants only; logic lives elsewhere.
//
// +kubebuilder:object:generate=true
// +groupName=machineconfiguration.strata.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every Strata kind.
	GroupVersion = schema.GroupVersion{Group: "machineconfiguration.strata.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Strata kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the Strata kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&MachineConfig{}, &MachineConfigList{},
		&MachineConfigPool{}, &MachineConfigPoolList{},
		&MachineOSConfig{}, &MachineOSConfigList{},
		&MachineOSBuild{}, &MachineOSBuildList{},
		&MachineConfiguration{}, &MachineConfigurationList{},
		&MachineConfigNode{}, &MachineConfigNodeList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
