package v1alpha1_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

func TestPullSpecPatterns(t *testing.T) {
	tagged := regexp.MustCompile(v1alpha1.TaggedPullSpecPattern)
	digested := regexp.MustCompile(v1alpha1.DigestedPullSpecPattern)
	hex := strings.Repeat("ab", 32)
	for spec, want := range map[string][2]bool{ // {tagged, digested}
		"127.0.0.1:5000/strata/os:latest":            {true, false},
		"quay.io/org/os-worker:v1.2_3":               {true, false},
		"localhost/os:1":                             {true, false},
		"registry:5000/os:1":                         {true, false},
		"quay.io/org/os@sha256:" + hex:               {false, true},
		"quay.io/org/os":                             {false, false},
		"org/os:latest":                              {false, false},
		"quay.io/org/os@sha256:abc":                  {false, false},
		"quay.io/Org/os:latest":                      {false, false},
		"quay.io/org/os:latest@sha256:" + hex:        {false, false},
		"127.0.0.1:5000/strata/os@sha256:" + hex:     {false, true},
		"quay.io/org/os:" + strings.Repeat("t", 129): {false, false},
	} {
		if got := tagged.MatchString(spec); got != want[0] {
			t.Errorf("tagged(%q) = %v, want %v", spec, got, want[0])
		}
		if got := digested.MatchString(spec); got != want[1] {
			t.Errorf("digested(%q) = %v, want %v", spec, got, want[1])
		}
	}
}

// The CRD rules are written in markers; the Go constants must say the same
// so that tools validating outside the apiserver agree with it.
func TestPatternsMatchCRDRules(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for file, patterns := range map[string][]string{
		"machineconfiguration.strata.dev_machineosconfigs.yaml": {v1alpha1.TaggedPullSpecPattern, v1alpha1.DigestedPullSpecPattern},
		"machineconfiguration.strata.dev_machineosbuilds.yaml":  {v1alpha1.TaggedPullSpecPattern, v1alpha1.DigestedPullSpecPattern},
	} {
		raw, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", file))
		if err != nil {
			t.Fatal(err)
		}
		// YAML folds long rules; compare with whitespace removed.
		text := strings.Join(strings.Fields(string(raw)), "")
		for _, p := range patterns {
			if !strings.Contains(text, p) {
				t.Errorf("%s has no rule with pattern %s", file, p)
			}
		}
	}
}

// PROJECT is kubebuilder's record of the API; it must name what the code
// defines.
func TestProjectFileMatchesAPI(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	var project struct {
		Domain    string `json:"domain"`
		Repo      string `json:"repo"`
		Layout    []string
		Resources []struct {
			API struct {
				Namespaced bool `json:"namespaced"`
			} `json:"api"`
			Group   string `json:"group"`
			Kind    string `json:"kind"`
			Version string `json:"version"`
			Path    string `json:"path"`
		} `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &project); err != nil {
		t.Fatal(err)
	}
	if got := project.Resources[0].Group + "." + project.Domain; got != v1alpha1.GroupVersion.Group {
		t.Errorf("PROJECT group %s, API group %s", got, v1alpha1.GroupVersion.Group)
	}
	kinds := map[string]bool{}
	for _, r := range project.Resources {
		kinds[r.Kind] = true
		if r.Version != v1alpha1.GroupVersion.Version || r.API.Namespaced || r.Path != project.Repo+"/api/v1alpha1" {
			t.Errorf("PROJECT resource %+v does not match the cluster-scoped %s API", r, v1alpha1.GroupVersion)
		}
	}
	for _, kind := range []string{"MachineConfig", "MachineConfigPool", "MachineOSConfig", "MachineOSBuild", "MachineConfiguration"} {
		if !kinds[kind] {
			t.Errorf("PROJECT lacks %s", kind)
		}
		if _, err := testenv.Scheme().New(v1alpha1.GroupVersion.WithKind(kind)); err != nil {
			t.Errorf("%s is not registered: %v", kind, err)
		}
	}
}
