package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/diskartifact"
	"github.com/strata-dev/strata/internal/referrers"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/test/testenv"
	"github.com/strata-dev/strata/test/testregistry"
)

// TestBootDisk runs stratactl boot-disk against a real API server and a
// real registry: by build, by pool (the pool's current image, also when
// the build that made it is gone), and by image; a build without a disk
// says why, in its BootDisk condition's words.
func TestBootDisk(t *testing.T) {
	const password = "stratactl-bootdisk-Passw0rd"
	reg := testregistry.Start(t, password)
	image := reg.Push(t, "strata/worker:worker-1", testregistry.Busybox(t))
	authFile := filepath.Join(t.TempDir(), "auth.json")
	auth := base64.StdEncoding.EncodeToString([]byte(reg.User + ":" + password))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
	if err := os.WriteFile(authFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := registry.KeychainFromFile(authFile)
	if err != nil {
		t.Fatal(err)
	}
	content := append([]byte("boot sector"), make([]byte, 2<<20)...)
	copy(content[1<<20:], "superblock")
	path := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	pub, err := diskartifact.Publish(context.Background(), referrers.Client{Registry: registry.Client{Insecure: []string{reg.Host}}}, image, kc, path)
	if err != nil {
		t.Fatal(err)
	}

	env := testenv.Start(t)
	ctx := context.Background()
	// New nodes get image; the MachineOSConfig has moved on to a newer
	// one, not released yet (awaiting approval), which has no disk.
	createWithStatus(ctx, t, env.Client, &v1alpha1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Annotations: map[string]string{v1alpha1.LayeredByAnnotation: "worker"}},
		Status:     v1alpha1.MachineConfigPoolStatus{NewNodes: &v1alpha1.NewNodeStatus{Image: image}},
	})
	mosc := &v1alpha1.MachineOSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "worker"},
		Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: "worker"},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: "push"},
			RenderedImagePushSpec:   reg.Host + "/strata/worker:latest",
			BootDisk:                &v1alpha1.BootDisk{SizeMiB: 1024},
		},
		Status: v1alpha1.MachineOSConfigStatus{CurrentImagePullSpec: reg.Host + "/strata/worker@sha256:" + strings.Repeat("e", 64)},
	}
	createWithStatus(ctx, t, env.Client, mosc)
	build := func(name string, bd *v1alpha1.BootDiskStatus, cond *metav1.Condition) {
		b := &v1alpha1.MachineOSBuild{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.MachineOSConfigLabel: "worker"}},
			Spec: v1alpha1.MachineOSBuildSpec{
				MachineConfig:         v1alpha1.LocalObjectReference{Name: "rendered-worker-1"},
				MachineOSConfig:       v1alpha1.LocalObjectReference{Name: "worker"},
				RenderedImagePushSpec: reg.Host + "/strata/worker:" + name,
			},
		}
		b.Status.DigestedImagePushSpec = image
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBuildSucceeded, Message: "built"})
		if cond != nil {
			meta.SetStatusCondition(&b.Status.Conditions, *cond)
		}
		b.Status.BootDisk = bd
		createWithStatus(ctx, t, env.Client, b)
	}
	build("worker-1", &v1alpha1.BootDiskStatus{Artifact: pub.Artifact, Image: image, Size: pub.Size, RawDigest: pub.RawDigest}, nil)
	build("worker-2", nil, &metav1.Condition{Type: v1alpha1.BuildBootDisk, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonBootDiskFailed,
		Message: "MachineOSConfig worker spec.bootDisk: the image does not fit in a disk of 1024 MiB"})
	kubeconfig := writeKubeconfig(t, env.Config)

	stratactl := func(args ...string) (string, error) {
		cmd := newBootDiskCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append(args, "--kubeconfig="+kubeconfig, "--registry-config="+authFile))
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	check := func(what string, args ...string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "disk.raw")
		out, err := stratactl(append(args, "-o", file)...)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got, err := os.ReadFile(file)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("%s: the written disk differs from the published one (%v)", what, err)
		}
		if !strings.Contains(out, pub.RawDigest) || !strings.Contains(out, image) {
			t.Errorf("%s: output %q does not name the image and the disk's digest", what, out)
		}
	}
	check("by build", "worker-1")
	check("by pool", "--pool", "worker")
	check("by image", "--image", image)

	out, err := stratactl("worker-2", "-o", filepath.Join(t.TempDir(), "disk.raw"))
	if err == nil || !strings.Contains(err.Error(), "does not fit in a disk of 1024 MiB") {
		t.Errorf("a build without a disk: %v, %q; want its BootDisk condition", err, out)
	}
	// The pool's current image keeps its disk in the registry after the
	// build that recorded it is gone.
	if err := env.Client.Delete(ctx, &v1alpha1.MachineOSBuild{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}); err != nil {
		t.Fatal(err)
	}
	check("by pool, from the registry", "--pool", "worker")
	if _, err := stratactl("worker-1", "--pool", "worker", "-o", "x"); err == nil {
		t.Error("a build and a pool at once were accepted")
	}
}
