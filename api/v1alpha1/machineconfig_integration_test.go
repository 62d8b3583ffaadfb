package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// exportedMachineConfig is the shape `oc get machineconfig -o yaml` prints:
// every spec field, defaults and nulls included (the corpus's
// repro/d4-exported-fields.yaml).
const exportedMachineConfig = `
apiVersion: machineconfiguration.strata.dev/v1alpha1
kind: MachineConfig
metadata:
  name: exported-defaults
spec:
  baseOSExtensionsContainerImage: ""
  config:
    ignition:
      version: 3.2.0
  extensions: null
  fips: false
  kernelArguments: null
  kernelType: ""
  osImageURL: ""
`

func TestExportedMachineConfigIsAccepted(t *testing.T) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(exportedMachineConfig), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("MachineConfig with OpenShift's printed defaults rejected: %v", err)
	}
}

// OpenShift splits a kernelArguments entry at spaces (the corpus's
// repro/d5-karg-with-spaces.yaml); the schema must let such entries through
// to the renderer, which splits them the same way.
func TestKernelArgumentEntryWithSpacesIsAccepted(t *testing.T) {
	err := env.Client.Create(context.Background(), mcUnstructured("karg-with-spaces", map[string]any{
		"kernelArguments": []any{"intel_iommu=on,sm_on modules_load=vfio-pci", `dyndbg="file x.c +p"`},
	}))
	if err != nil {
		t.Errorf("kernel arguments with spaces rejected: %v", err)
	}
}

// The fields a MachineConfig has only for OpenShift's sake are refused,
// when set to what Strata cannot do, with the field and the reason.
func TestUnsupportedOpenShiftFieldsAreRejected(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		spec map[string]any
		want []string
	}{
		{"fips true", map[string]any{"fips": true}, []string{"spec.fips", v1alpha1.FIPSUnsupportedMessage}},
		{
			"extensions container", map[string]any{"baseOSExtensionsContainerImage": "quay.io/openshift/extensions@sha256:" + strings.Repeat("0", 64)},
			[]string{"spec.baseOSExtensionsContainerImage", v1alpha1.BaseOSExtensionsContainerImageUnsupportedMessage},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(ctx, mcUnstructured("reject-"+strings.ReplaceAll(tc.name, " ", "-"), tc.spec))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// The CRD's CEL messages are written in markers; the Go constants that
// stratactl refuses with must say the same.
func TestUnsupportedFieldMessagesMatchCRD(t *testing.T) {
	want := map[string]string{
		"fips":                           v1alpha1.FIPSUnsupportedMessage,
		"baseOSExtensionsContainerImage": v1alpha1.BaseOSExtensionsContainerImageUnsupportedMessage,
	}
	for _, crd := range env.CRDs {
		if crd.Name != "machineconfigs."+v1alpha1.GroupVersion.Group {
			continue
		}
		props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
		for field, msg := range want {
			rules := props[field].XValidations
			if len(rules) != 1 || rules[0].Message != msg {
				t.Errorf("spec.%s: CRD rules %+v, want one with message %q", field, rules, msg)
			}
		}
		return
	}
	t.Fatal("no MachineConfig CRD installed")
}
