package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

func machineConfigNodeCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "machineconfiguration.strata.dev_machineconfignodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}

// TestMachineConfigNodeColumns: `kubectl get mcn` shows OpenShift's
// columns (PoolName, DesiredConfig, CurrentConfig, Updated) from the same
// fields, so that what people and scripts read there works here; -o wide
// adds the images, the state and the reason.
func TestMachineConfigNodeColumns(t *testing.T) {
	crd := machineConfigNodeCRD(t)
	if crd.Spec.Scope != apiextensionsv1.ClusterScoped || len(crd.Spec.Names.ShortNames) != 1 || crd.Spec.Names.ShortNames[0] != "mcn" {
		t.Errorf("scope %s, short names %v; want Cluster and [mcn]", crd.Spec.Scope, crd.Spec.Names.ShortNames)
	}
	type column struct {
		name, path string
		priority   int32
	}
	want := []column{
		{"PoolName", ".spec.pool.name", 0},
		{"DesiredConfig", ".spec.configVersion.desired", 0},
		{"CurrentConfig", ".status.configVersion.current", 0},
		{"Updated", `.status.conditions[?(@.type=="Updated")].status`, 0},
		{"Age", ".metadata.creationTimestamp", 0},
		{"DesiredImage", ".spec.configImage.desiredImage", 1},
		{"CurrentImage", ".status.configImage.currentImage", 1},
		{"State", ".status.state", 1},
		{"Reason", ".status.reason", 1},
	}
	var got []column
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		got = append(got, column{c.Name, c.JSONPath, c.Priority})
	}
	if len(got) != len(want) {
		t.Fatalf("columns %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("column %d: %v, want %v", i, got[i], want[i])
		}
	}
	if crd.Spec.Versions[0].Subresources == nil || crd.Spec.Versions[0].Subresources.Status == nil {
		t.Error("no status subresource")
	}
}

// The images' pattern in the schema is DigestedPullSpecPattern, which the
// daemon checks before it writes (rollout/mcn.go).
func TestMachineConfigNodeImagePatterns(t *testing.T) {
	props := machineConfigNodeCRD(t).Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
	for path, p := range map[string]apiextensionsv1.JSONSchemaProps{
		"spec.configImage.desiredImage":   props["spec"].Properties["configImage"].Properties["desiredImage"],
		"status.configImage.currentImage": props["status"].Properties["configImage"].Properties["currentImage"],
		"status.configImage.desiredImage": props["status"].Properties["configImage"].Properties["desiredImage"],
	} {
		if p.Pattern != v1alpha1.DigestedPullSpecPattern {
			t.Errorf("%s pattern %q, want DigestedPullSpecPattern", path, p.Pattern)
		}
	}
}

// TestMachineConfigNodeValidation: the API server refuses a
// MachineConfigNode named after another node than its spec's, and images
// not pinned by digest, naming the field.
func TestMachineConfigNodeValidation(t *testing.T) {
	ctx := context.Background()
	image := "registry.example.com/strata/os@" + digest
	for _, c := range []struct {
		name string
		mcn  v1alpha1.MachineConfigNode
		want []string
	}{
		{"another node", v1alpha1.MachineConfigNode{
			ObjectMeta: metav1.ObjectMeta{Name: "mcn-a"},
			Spec:       v1alpha1.MachineConfigNodeSpec{Node: v1alpha1.LocalObjectReference{Name: "mcn-b"}},
		}, []string{"spec.node.name should match metadata.name"}},
		{"a tag", v1alpha1.MachineConfigNode{
			ObjectMeta: metav1.ObjectMeta{Name: "mcn-c"},
			Spec: v1alpha1.MachineConfigNodeSpec{Node: v1alpha1.LocalObjectReference{Name: "mcn-c"},
				ConfigImage: v1alpha1.MachineConfigNodeSpecConfigImage{DesiredImage: "registry.example.com/strata/os:latest"}},
		}, []string{"spec.configImage.desiredImage"}},
	} {
		err := env.Client.Create(ctx, &c.mcn)
		if err == nil {
			_ = env.Client.Delete(ctx, &c.mcn)
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v does not say %q", c.name, err, w)
			}
		}
	}
	ok := &v1alpha1.MachineConfigNode{
		ObjectMeta: metav1.ObjectMeta{Name: "mcn-d"},
		Spec: v1alpha1.MachineConfigNodeSpec{Node: v1alpha1.LocalObjectReference{Name: "mcn-d"},
			ConfigImage: v1alpha1.MachineConfigNodeSpecConfigImage{DesiredImage: image}},
	}
	if err := env.Client.Create(ctx, ok); err != nil {
		t.Fatalf("a valid MachineConfigNode: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ok) })
}
