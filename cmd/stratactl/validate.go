package main

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// validateUnsupportedFields refuses what the CRD schema's CEL rules refuse
// of the fields a MachineConfig has only for OpenShift's sake, with the
// same messages, so that render and the API server agree.
func validateUnsupportedFields(spec *v1alpha1.MachineConfigSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.FIPS {
		errs = append(errs, field.Invalid(fldPath.Child("fips"), spec.FIPS, v1alpha1.FIPSUnsupportedMessage))
	}
	if spec.BaseOSExtensionsContainerImage != "" {
		errs = append(errs, field.Invalid(fldPath.Child("baseOSExtensionsContainerImage"), spec.BaseOSExtensionsContainerImage, v1alpha1.BaseOSExtensionsContainerImageUnsupportedMessage))
	}
	return errs
}
