package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// The controllers cut a build failure to the Go constants before they
// write it; the constants must be the CRD's limits, or a write is refused.
func TestFailureLimitsMatchCRD(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "machineconfiguration.strata.dev_machineosbuilds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	failure := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["failure"]
	for field, want := range map[string]int64{"message": v1alpha1.MaxBuildFailureMessage, "logTail": v1alpha1.MaxBuildFailureLogTail} {
		got := failure.Properties[field].MaxLength
		if got == nil || *got != want {
			t.Errorf("status.failure.%s maxLength %v in the CRD, %d in Go", field, got, want)
		}
	}
}
