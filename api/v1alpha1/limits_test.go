package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// A token's default overlap stays below a short rotationPeriod (the
// CRD's rule would refuse the pair if it were written out), and a token
// without a rotationPeriod never expires.
func TestBootstrapTokenOverlap(t *testing.T) {
	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Duration{Duration: v}
	}
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		spec    v1alpha1.BootstrapToken
		overlap time.Duration
		expiry  time.Time
	}{
		{v1alpha1.BootstrapToken{}, time.Hour, time.Time{}},
		{v1alpha1.BootstrapToken{RotationPeriod: d("24h")}, time.Hour, issued.Add(25 * time.Hour)},
		{v1alpha1.BootstrapToken{RotationPeriod: d("30m")}, 15 * time.Minute, issued.Add(45 * time.Minute)},
		{v1alpha1.BootstrapToken{RotationPeriod: d("24h"), RotationOverlap: d("0s")}, 0, issued.Add(24 * time.Hour)},
	} {
		if got := tc.spec.Overlap(); got != tc.overlap {
			t.Errorf("%+v: overlap %v, want %v", tc.spec, got, tc.overlap)
		}
		if got := tc.spec.Expiry(issued); !got.Equal(tc.expiry) {
			t.Errorf("%+v: expiry %v, want %v", tc.spec, got, tc.expiry)
		}
	}
}
