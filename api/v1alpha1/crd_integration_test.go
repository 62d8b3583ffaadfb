package v1alpha1_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// These tests install the generated CRDs into a real apiserver and check
// that the schema, not a controller, accepts the samples and rejects bad
// objects with a message that names the field.

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error { env = e; return nil })
}

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestSamplesAreAccepted creates what `kubectl apply -k config/samples/`
// does, and the MachineOSBuild example, and checks that the samples can be
// followed: every Secret the MachineOSConfigs name is among them, and none
// is a MachineOSBuild, which only the build controller makes (one made by
// hand never completes).
func TestSamplesAreAccepted(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "strata-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "config", "samples")
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := sigsyaml.UnmarshalStrict(raw, &kustomization); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	var samples []*unstructured.Unstructured
	for _, name := range kustomization.Resources {
		samples = append(samples, decodeAll(t, filepath.Join(dir, name))...)
	}
	kinds := map[string]bool{}
	secrets := map[string]bool{}
	for _, obj := range samples {
		kinds[obj.GetKind()] = true
		if obj.GetKind() == "Secret" && obj.GetNamespace() == "strata-system" {
			secrets[obj.GetName()] = true
		}
	}
	for _, kind := range []string{"MachineConfig", "MachineConfigPool", "MachineOSConfig", "Secret"} {
		if !kinds[kind] {
			t.Errorf("no sample of kind %s", kind)
		}
	}
	if kinds["MachineOSBuild"] {
		t.Error("a sample MachineOSBuild: only the build controller makes them; one made by hand never completes")
	}
	for _, obj := range samples {
		if obj.GetKind() != "MachineOSConfig" {
			continue
		}
		for _, field := range []string{"baseImagePullSecret", "renderedImagePushSecret", "renderedImagePullSecret"} {
			name, found, _ := unstructured.NestedString(obj.Object, "spec", field, "name")
			if found && !secrets[name] {
				t.Errorf("MachineOSConfig %s: spec.%s names Secret strata-system/%s, which no sample creates", obj.GetName(), field, name)
			}
		}
	}

	example := decodeAll(t, filepath.Join("testdata", "machineosbuild.yaml"))
	for _, obj := range append(samples, example...) {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Errorf("%s %s rejected: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// decodeAll reads every object of a YAML file.
func decodeAll(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		t.Fatalf("%s holds no object", path)
	}
	return objs
}

func TestShortNamesAndStatusSubresource(t *testing.T) {
	want := map[string]string{
		"machineconfigs.machineconfiguration.strata.dev":     "mc",
		"machineconfigpools.machineconfiguration.strata.dev": "mcp",
		"machineosconfigs.machineconfiguration.strata.dev":   "mosc",
		"machineosbuilds.machineconfiguration.strata.dev":    "mosb",
	}
	for _, crd := range env.CRDs {
		short, ok := want[crd.Name]
		if !ok {
			continue
		}
		delete(want, crd.Name)
		if len(crd.Spec.Names.ShortNames) != 1 || crd.Spec.Names.ShortNames[0] != short {
			t.Errorf("%s: short names %v, want [%s]", crd.Name, crd.Spec.Names.ShortNames, short)
		}
		if crd.Spec.Scope != "Cluster" {
			t.Errorf("%s: scope %s, want Cluster", crd.Name, crd.Spec.Scope)
		}
		v := crd.Spec.Versions[0]
		if v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("%s: no status subresource", crd.Name)
		}
		if len(v.AdditionalPrinterColumns) == 0 {
			t.Errorf("%s: no printer columns", crd.Name)
		}
	}
	for name := range want {
		t.Errorf("CRD %s not installed", name)
	}
}

func validMOSC(name string) *v1alpha1.MachineOSConfig {
	return &v1alpha1.MachineOSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: "worker"},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: "push"},
			RenderedImagePushSpec:   "127.0.0.1:5000/strata/os:latest",
		},
	}
}

func validMOSB(name string) *v1alpha1.MachineOSBuild {
	return &v1alpha1.MachineOSBuild{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MachineOSBuildSpec{
			MachineConfig:         v1alpha1.LocalObjectReference{Name: "rendered-worker-abc"},
			MachineOSConfig:       v1alpha1.LocalObjectReference{Name: "worker"},
			RenderedImagePushSpec: "registry.example.com/strata/os:worker-abc",
		},
	}
}

func validMCP(name string) *v1alpha1.MachineConfigPool {
	return &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func mcUnstructured(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "MachineConfig",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	return u
}

func TestValidObjectsAreAccepted(t *testing.T) {
	ctx := context.Background()
	mcp := validMCP("accept-percent")
	pct := intstr.FromString("50%")
	mcp.Spec.MaxUnavailable = &pct
	mcp.Spec.DrainTimeout = &metav1.Duration{}
	mcp.Spec.DrainTimeout.Duration = 90e9
	if err := env.Client.Create(ctx, mcp); err != nil {
		t.Errorf("pool with maxUnavailable 50%%: %v", err)
	}

	// A short period with no overlap: the default overlap stays below it.
	if err := env.Client.Create(ctx, specPool("accept-token-rotation", map[string]any{"bootstrapToken": map[string]any{"rotationPeriod": "30m"}})); err != nil {
		t.Errorf("pool with bootstrapToken.rotationPeriod 30m: %v", err)
	}

	defaulted := validMCP("accept-default")
	if err := env.Client.Create(ctx, defaulted); err != nil {
		t.Fatal(err)
	}
	if defaulted.Spec.MaxUnavailable == nil || defaulted.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("maxUnavailable defaulted to %v, want 1", defaulted.Spec.MaxUnavailable)
	}
	if defaulted.Spec.MaxFailedNodes == nil || *defaulted.Spec.MaxFailedNodes != 1 {
		t.Errorf("maxFailedNodes defaulted to %v, want 1", defaulted.Spec.MaxFailedNodes)
	}

	windowed := validMCP("accept-windows")
	windowed.Spec.MaintenanceWindows = []v1alpha1.MaintenanceWindow{
		{Days: []v1alpha1.Weekday{v1alpha1.Saturday, v1alpha1.Sunday}, Start: "22:00", Duration: metav1.Duration{Duration: 168 * time.Hour}, TimeZone: "Europe/Berlin"},
		{Days: []v1alpha1.Weekday{v1alpha1.Monday}, Start: "00:00", Duration: metav1.Duration{Duration: time.Minute}},
	}
	if err := env.Client.Create(ctx, windowed); err != nil {
		t.Errorf("pool with maintenance windows: %v", err)
	} else if got := windowed.Spec.MaintenanceWindows[1].TimeZone; got != "UTC" {
		t.Errorf("timeZone defaulted to %q, want UTC", got)
	}

	rollout := validMCP("accept-canary")
	rollout.Spec.StageAhead = ptr.To(int32(3))
	rollout.Spec.Canary = &v1alpha1.Canary{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "yes"}},
		SoakTime: metav1.Duration{Duration: 0}}
	if err := env.Client.Create(ctx, rollout); err != nil {
		t.Errorf("pool with a canary (no soak) and stageAhead: %v", err)
	}
	if defaulted.Spec.StageAhead == nil || *defaulted.Spec.StageAhead != 0 {
		t.Errorf("stageAhead defaulted to %v, want 0", defaulted.Spec.StageAhead)
	}

	mosc := validMOSC("accept-mosc")
	mosc.Spec.ContainerFile = []v1alpha1.MachineOSContainerfile{{Content: "RUN true"}, {ContainerfileArch: v1alpha1.ContainerfileArchARM64, Content: "RUN true"}}
	if err := env.Client.Create(ctx, mosc); err != nil {
		t.Fatalf("MachineOSConfig: %v", err)
	}
	if mosc.Spec.ContainerFile[0].ContainerfileArch != v1alpha1.ContainerfileArchNoArch {
		t.Errorf("containerfileArch defaulted to %q, want NoArch", mosc.Spec.ContainerFile[0].ContainerfileArch)
	}
	mosc.Status.CurrentImagePullSpec = "127.0.0.1:5000/strata/os@" + digest
	if err := env.Client.Status().Update(ctx, mosc); err != nil {
		t.Errorf("digested currentImagePullSpec rejected: %v", err)
	}

	disk := validMOSC("accept-bootdisk")
	disk.Spec.MachineConfigPool.Name = "accept-bootdisk"
	disk.Spec.BootDisk = &v1alpha1.BootDisk{}
	if err := env.Client.Create(ctx, disk); err != nil {
		t.Errorf("MachineOSConfig with bootDisk: %v", err)
	} else if disk.Spec.BootDisk.SizeMiB != v1alpha1.DefaultBootDiskSizeMiB {
		t.Errorf("bootDisk.sizeMiB defaulted to %d, want %d", disk.Spec.BootDisk.SizeMiB, v1alpha1.DefaultBootDiskSizeMiB)
	}

	mosb := validMOSB("accept-mosb")
	if err := env.Client.Create(ctx, mosb); err != nil {
		t.Fatal(err)
	}
	mosb.Status.BootDisk = &v1alpha1.BootDiskStatus{Artifact: "127.0.0.1:5000/strata/os@" + digest, Size: 4 << 30, RawDigest: digest, SizeMiB: 4096}
	if err := env.Client.Status().Update(ctx, mosb); err != nil {
		t.Errorf("status.bootDisk rejected: %v", err)
	}
	// Labels and annotations of a MachineOSBuild may change; its spec may not.
	mosb.Labels = map[string]string{"x": "y"}
	if err := env.Client.Update(ctx, mosb); err != nil {
		t.Errorf("metadata update of a MachineOSBuild rejected: %v", err)
	}

	if err := env.Client.Create(ctx, mcUnstructured("accept-mc", map[string]any{
		"config":          map[string]any{"ignition": map[string]any{"version": "3.5.0"}, "unknown": "kept"},
		"kernelArguments": []any{"mitigations=auto,nosmt", "console=ttyS0,115200n8"},
		"kernelType":      "64k-pages",
	})); err != nil {
		t.Errorf("MachineConfig: %v", err)
	}
}

func TestInvalidObjectsAreRejected(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// do performs the write that must be rejected.
		do func(name string) error
		// want are substrings the apiserver's message must contain: the
		// field and what is wrong.
		want []string
	}{
		{
			name: "push spec without tag",
			do: func(n string) error {
				m := validMOSC(n)
				m.Spec.RenderedImagePushSpec = "127.0.0.1:5000/strata/os"
				return env.Client.Create(ctx, m)
			},
			want: []string{"spec.renderedImagePushSpec", "registry/repository:tag"},
		},
		{
			name: "push spec with a digest",
			do: func(n string) error {
				m := validMOSC(n)
				m.Spec.RenderedImagePushSpec = "quay.io/strata/os@" + digest
				return env.Client.Create(ctx, m)
			},
			want: []string{"spec.renderedImagePushSpec", "not a digest"},
		},
		{
			name: "push spec without registry host",
			do: func(n string) error {
				m := validMOSC(n)
				m.Spec.RenderedImagePushSpec = "strata/os:latest"
				return env.Client.Create(ctx, m)
			},
			want: []string{"spec.renderedImagePushSpec", "registry host"},
		},
		{
			name: "boot disk too small",
			do: func(n string) error {
				m := validMOSC(n)
				m.Spec.BootDisk = &v1alpha1.BootDisk{SizeMiB: 100}
				return env.Client.Create(ctx, m)
			},
			want: []string{"spec.bootDisk.sizeMiB", "greater than or equal to 512"},
		},
		{
			name: "boot disk artifact by tag",
			do: func(n string) error {
				b := validMOSB(n)
				if err := env.Client.Create(ctx, b); err != nil {
					return err
				}
				b.Status.BootDisk = &v1alpha1.BootDiskStatus{Artifact: "127.0.0.1:5000/strata/os:disk"}
				return env.Client.Status().Update(ctx, b)
			},
			want: []string{"status.bootDisk.artifact", "registry/repository@sha256"},
		},
		{
			name: "unknown containerfile arch",
			do: func(n string) error {
				m := validMOSC(n)
				m.Spec.ContainerFile = []v1alpha1.MachineOSContainerfile{{ContainerfileArch: "X86", Content: "RUN true"}}
				return env.Client.Create(ctx, m)
			},
			want: []string{"spec.containerFile[0].containerfileArch", "Unsupported value"},
		},
		{
			name: "two containerfiles for one arch",
			do: func(n string) error {
				m := validMOSC(n)
				m.Spec.ContainerFile = []v1alpha1.MachineOSContainerfile{{Content: "RUN a"}, {ContainerfileArch: "NoArch", Content: "RUN b"}}
				return env.Client.Create(ctx, m)
			},
			want: []string{"spec.containerFile[1]", "Duplicate value"},
		},
		{
			name: "empty containerfile content",
			do: func(n string) error {
				m := validMOSC(n)
				m.Spec.ContainerFile = []v1alpha1.MachineOSContainerfile{{Content: ""}}
				return env.Client.Create(ctx, m)
			},
			want: []string{"spec.containerFile[0].content"},
		},
		{
			name: "unknown image builder type",
			do: func(n string) error {
				m := validMOSC(n)
				m.Spec.ImageBuilder.ImageBuilderType = "Pod"
				return env.Client.Create(ctx, m)
			},
			want: []string{"spec.imageBuilder.imageBuilderType", "Unsupported value"},
		},
		{
			name: "missing push secret",
			do: func(n string) error {
				m := validMOSC(n)
				m.Spec.RenderedImagePushSecret.Name = ""
				return env.Client.Create(ctx, m)
			},
			want: []string{"spec.renderedImagePushSecret.name"},
		},
		{
			name: "non-digest pull spec in MachineOSConfig status",
			do: func(n string) error {
				m := validMOSC(n)
				if err := env.Client.Create(ctx, m); err != nil {
					return err
				}
				m.Status.CurrentImagePullSpec = "127.0.0.1:5000/strata/os:latest"
				return env.Client.Status().Update(ctx, m)
			},
			want: []string{"status.currentImagePullSpec", "@sha256:"},
		},
		{
			name: "short digest in MachineOSBuild status",
			do: func(n string) error {
				b := validMOSB(n)
				if err := env.Client.Create(ctx, b); err != nil {
					return err
				}
				b.Status.DigestedImagePushSpec = "registry.example.com/strata/os@sha256:abc"
				return env.Client.Status().Update(ctx, b)
			},
			want: []string{"status.digestedImagePushSpec", "64 hex digits"},
		},
		{
			name: "MachineOSBuild spec change",
			do: func(n string) error {
				b := validMOSB(n)
				if err := env.Client.Create(ctx, b); err != nil {
					return err
				}
				b.Spec.MachineConfig.Name = "rendered-worker-other"
				return env.Client.Update(ctx, b)
			},
			want: []string{"spec is immutable"},
		},
		{
			name: "maxUnavailable 0",
			do: func(n string) error {
				p := validMCP(n)
				zero := intstr.FromInt32(0)
				p.Spec.MaxUnavailable = &zero
				return env.Client.Create(ctx, p)
			},
			want: []string{"spec.maxUnavailable", "at least 1"},
		},
		{
			name: "maxUnavailable 0%",
			do: func(n string) error {
				p := validMCP(n)
				zero := intstr.FromString("0%")
				p.Spec.MaxUnavailable = &zero
				return env.Client.Create(ctx, p)
			},
			want: []string{"spec.maxUnavailable", "percentage"},
		},
		{
			name: "maxUnavailable not a number",
			do: func(n string) error {
				p := validMCP(n)
				v := intstr.FromString("half")
				p.Spec.MaxUnavailable = &v
				return env.Client.Create(ctx, p)
			},
			want: []string{"spec.maxUnavailable"},
		},
		{
			name: "maxFailedNodes 0",
			do: func(n string) error {
				p := validMCP(n)
				p.Spec.MaxFailedNodes = ptr.To[int32](0)
				return env.Client.Create(ctx, p)
			},
			want: []string{"spec.maxFailedNodes"},
		},
		{
			name: "window day not a short day name",
			do: func(n string) error {
				w := map[string]any{"days": []any{"Mon"}, "start": "01:00", "duration": "1h"}
				w["days"] = []any{"Monday"}
				return env.Client.Create(ctx, windowPool(n, w))
			},
			want: []string{"spec.maintenanceWindows[0]", "days"},
		},
		{
			name: "window without days",
			do: func(n string) error {
				w := map[string]any{"days": []any{"Mon"}, "start": "01:00", "duration": "1h"}
				w["days"] = []any{}
				return env.Client.Create(ctx, windowPool(n, w))
			},
			want: []string{"spec.maintenanceWindows[0]", "days"},
		},
		{
			name: "window start 24:00",
			do: func(n string) error {
				w := map[string]any{"days": []any{"Mon"}, "start": "01:00", "duration": "1h"}
				w["start"] = "24:00"
				return env.Client.Create(ctx, windowPool(n, w))
			},
			want: []string{"spec.maintenanceWindows[0]", "start"},
		},
		{
			name: "window start without leading zero",
			do: func(n string) error {
				w := map[string]any{"days": []any{"Mon"}, "start": "01:00", "duration": "1h"}
				w["start"] = "1:00"
				return env.Client.Create(ctx, windowPool(n, w))
			},
			want: []string{"spec.maintenanceWindows[0]", "start"},
		},
		{
			name: "window duration 0",
			do: func(n string) error {
				w := map[string]any{"days": []any{"Mon"}, "start": "01:00", "duration": "1h"}
				w["duration"] = "0s"
				return env.Client.Create(ctx, windowPool(n, w))
			},
			want: []string{"spec.maintenanceWindows[0]", "duration must be more than 0"},
		},
		{
			name: "window duration over a week",
			do: func(n string) error {
				w := map[string]any{"days": []any{"Mon"}, "start": "01:00", "duration": "1h"}
				w["duration"] = "169h"
				return env.Client.Create(ctx, windowPool(n, w))
			},
			want: []string{"spec.maintenanceWindows[0]", "duration must be more than 0"},
		},
		{
			name: "more than 16 windows",
			do: func(n string) error {
				var ws []map[string]any
				for range 17 {
					ws = append(ws, map[string]any{"days": []any{"Mon"}, "start": "01:00", "duration": "1h"})
				}
				return env.Client.Create(ctx, windowPool(n, ws...))
			},
			want: []string{"spec.maintenanceWindows", "17"},
		},
		{
			name: "bootstrap token rotated more often than every 10m",
			do: func(n string) error {
				return env.Client.Create(ctx, specPool(n, map[string]any{"bootstrapToken": map[string]any{"rotationPeriod": "5m"}}))
			},
			want: []string{"spec.bootstrapToken.rotationPeriod", "at least 10m"},
		},
		{
			name: "bootstrap token overlap as long as its rotation period",
			do: func(n string) error {
				return env.Client.Create(ctx, specPool(n, map[string]any{"bootstrapToken": map[string]any{"rotationPeriod": "1h", "rotationOverlap": "60m"}}))
			},
			want: []string{"spec.bootstrapToken", "rotationOverlap must be shorter than rotationPeriod"},
		},
		{
			name: "stageAhead negative",
			do: func(n string) error {
				return env.Client.Create(ctx, specPool(n, map[string]any{"stageAhead": -1}))
			},
			want: []string{"spec.stageAhead", "greater than or equal to 0"},
		},
		{
			name: "canary with both count and selector",
			do: func(n string) error {
				return env.Client.Create(ctx, specPool(n, map[string]any{"canary": map[string]any{
					"count": 1, "nodeSelector": map[string]any{"matchLabels": map[string]any{"canary": "yes"}}, "soakTime": "1h"}}))
			},
			want: []string{"spec.canary", "exactly one of count and nodeSelector"},
		},
		{
			name: "canary with neither count nor selector",
			do: func(n string) error {
				return env.Client.Create(ctx, specPool(n, map[string]any{"canary": map[string]any{"soakTime": "1h"}}))
			},
			want: []string{"spec.canary", "exactly one of count and nodeSelector"},
		},
		{
			name: "canary count 0",
			do: func(n string) error {
				return env.Client.Create(ctx, specPool(n, map[string]any{"canary": map[string]any{"count": 0, "soakTime": "1h"}}))
			},
			want: []string{"spec.canary.count"},
		},
		{
			name: "canary soak over 30 days",
			do: func(n string) error {
				return env.Client.Create(ctx, specPool(n, map[string]any{"canary": map[string]any{"count": 1, "soakTime": "721h"}}))
			},
			want: []string{"spec.canary", "soakTime must be from 0s to 720h"},
		},
		{
			name: "canary without a soak time",
			do: func(n string) error {
				return env.Client.Create(ctx, specPool(n, map[string]any{"canary": map[string]any{"count": 1}}))
			},
			want: []string{"spec.canary.soakTime", "Required"},
		},
		{
			name: "drainTimeout not a duration",
			do: func(n string) error {
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": v1alpha1.GroupVersion.String(), "kind": "MachineConfigPool",
					"metadata": map[string]any{"name": n},
					"spec":     map[string]any{"drainTimeout": "ten minutes"},
				}}
				return env.Client.Create(ctx, u)
			},
			want: []string{"spec.drainTimeout"},
		},
		{
			name: "unknown kernelType",
			do: func(n string) error {
				return env.Client.Create(ctx, mcUnstructured(n, map[string]any{"kernelType": "rt"}))
			},
			want: []string{"spec.kernelType", "Unsupported value"},
		},
		{
			name: "kernel argument with a tab",
			do: func(n string) error {
				return env.Client.Create(ctx, mcUnstructured(n, map[string]any{"kernelArguments": []any{"quiet\tsplash"}}))
			},
			want: []string{"spec.kernelArguments[0]"},
		},
		{
			name: "kernel argument of spaces only",
			do: func(n string) error {
				return env.Client.Create(ctx, mcUnstructured(n, map[string]any{"kernelArguments": []any{"  "}}))
			},
			want: []string{"spec.kernelArguments[0]"},
		},
		{
			name: "kernel argument with a control character",
			do: func(n string) error {
				return env.Client.Create(ctx, mcUnstructured(n, map[string]any{"kernelArguments": []any{"a\x07b"}}))
			},
			want: []string{"spec.kernelArguments[0]"},
		},
		{
			name: "Ignition config not an object",
			do: func(n string) error {
				return env.Client.Create(ctx, mcUnstructured(n, map[string]any{"config": "ignition: 3.4.0"}))
			},
			want: []string{"spec.config", "object"},
		},
		{
			name: "extension with a bad name",
			do: func(n string) error {
				return env.Client.Create(ctx, mcUnstructured(n, map[string]any{"extensions": []any{"rm -rf /"}}))
			},
			want: []string{"spec.extensions[0]"},
		},
	}
	if len(cases) < 12 {
		t.Fatalf("only %d rejection cases", len(cases))
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "reject-" + strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")
			name = strings.NewReplacer("%", "pct", "'", "").Replace(name)
			if len(name) > 60 {
				name = name[:60]
			}
			name = strings.TrimRight(name, "-") + "-" + string(rune('a'+i%26))
			err := tc.do(name)
			if err == nil {
				t.Fatal("the apiserver accepted it")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// specPool is a pool with the given spec, as a user would write it.
func specPool(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "MachineConfigPool",
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
}

// windowPool is a pool with the given maintenanceWindows, as a user would
// write them.
func windowPool(name string, windows ...map[string]any) *unstructured.Unstructured {
	ws := make([]any, 0, len(windows))
	for _, w := range windows {
		ws = append(ws, w)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "MachineConfigPool",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"maintenanceWindows": ws},
	}}
}
