package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
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
	reg, authFile, publish := bootDiskRegistry(t)
	image := reg.Push(t, "strata/worker:worker-1", testregistry.Busybox(t))
	content := append([]byte("boot sector"), make([]byte, 2<<20)...)
	copy(content[1<<20:], "superblock")
	pub := publish(image, content)

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

// bootDiskRegistry starts a registry that wants a login, writes its
// credentials to authFile, and returns publish, which attaches a disk of
// content to an image in it as the boot disk Job does.
func bootDiskRegistry(t *testing.T) (reg *testregistry.Registry, authFile string, publish func(image string, content []byte) diskartifact.Disk) {
	t.Helper()
	const password = "stratactl-bootdisk-Passw0rd"
	reg = testregistry.Start(t, password)
	authFile = filepath.Join(t.TempDir(), "auth.json")
	auth := base64.StdEncoding.EncodeToString([]byte(reg.User + ":" + password))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
	if err := os.WriteFile(authFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := registry.KeychainFromFile(authFile)
	if err != nil {
		t.Fatal(err)
	}
	publish = func(image string, content []byte) diskartifact.Disk {
		t.Helper()
		path := filepath.Join(t.TempDir(), "disk.raw")
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		pub, err := diskartifact.Publish(context.Background(), referrers.Client{Registry: registry.Client{Insecure: []string{reg.Host}}}, image, kc, path)
		if err != nil {
			t.Fatal(err)
		}
		return pub
	}
	return reg, authFile, publish
}

// TestBootDiskRefusesArtifactOfAnotherImage: stratactl boot-disk takes
// the artifact a build's status.bootDisk names only if it is a referrer of
// the build's image: in the image's repository, with the image as its
// subject. A status pointed at the disk of another image, or at a disk of
// the same digest pushed to another repository, is refused, naming the
// build, the image and the artifact, and nothing is written.
func TestBootDiskRefusesArtifactOfAnotherImage(t *testing.T) {
	reg, authFile, publish := bootDiskRegistry(t)
	image := reg.Push(t, "strata/worker:worker-1", testregistry.Busybox(t))
	other, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, map[string]string{"etc/motd": "another image\n"}))
	if err != nil {
		t.Fatal(err)
	}
	otherImage := reg.Push(t, "strata/worker:other", other)
	// The same image, by the same digest, in a repository of someone else's.
	elsewhere := reg.Push(t, "attacker/worker:worker-1", testregistry.Busybox(t))
	if strings.TrimPrefix(elsewhere, reg.Host+"/attacker/worker") != strings.TrimPrefix(image, reg.Host+"/strata/worker") {
		t.Fatalf("%s and %s should have one digest", image, elsewhere)
	}
	content := append([]byte("the pool's disk"), make([]byte, 1<<20)...)
	right := publish(image, content)
	ofOther := publish(otherImage, append([]byte("another image's disk"), make([]byte, 1<<20)...))
	ofElsewhere := publish(elsewhere, append([]byte("someone else's disk"), make([]byte, 1<<20)...))

	env := testenv.Start(t)
	ctx := context.Background()
	build := func(name string, artifact diskartifact.Disk) {
		b := &v1alpha1.MachineOSBuild{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MachineOSBuildSpec{
				MachineConfig:         v1alpha1.LocalObjectReference{Name: "rendered-worker-1"},
				MachineOSConfig:       v1alpha1.LocalObjectReference{Name: "worker"},
				RenderedImagePushSpec: reg.Host + "/strata/worker:" + name,
			},
		}
		b.Status.DigestedImagePushSpec = image
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBuildSucceeded, Message: "built"})
		// What a forged status says: the artifact, and that it holds the
		// build's image.
		b.Status.BootDisk = &v1alpha1.BootDiskStatus{Artifact: artifact.Artifact, Image: image, Size: artifact.Size, RawDigest: artifact.RawDigest}
		createWithStatus(ctx, t, env.Client, b)
	}
	build("worker-right", right)
	build("worker-other-image", ofOther)
	build("worker-other-repository", ofElsewhere)
	kubeconfig := writeKubeconfig(t, env.Config)

	download := func(build string) (string, error) {
		file := filepath.Join(t.TempDir(), "disk.raw")
		cmd := newBootDiskCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs([]string{build, "-o", file, "--kubeconfig=" + kubeconfig, "--registry-config=" + authFile})
		err := cmd.ExecuteContext(ctx)
		if err != nil {
			if _, serr := os.Stat(file); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("boot-disk %s failed (%v) but wrote %s", build, err, file)
			}
			return "", err
		}
		got, rerr := os.ReadFile(file)
		if rerr != nil {
			t.Fatal(rerr)
		}
		return string(got), nil
	}

	if got, err := download("worker-right"); err != nil || got != string(content) {
		t.Errorf("the build's own disk: %v (%d bytes, want the published %d)", err, len(got), len(content))
	}
	for _, tc := range []struct {
		build    string
		artifact diskartifact.Disk
		want     string
	}{
		{"worker-other-image", ofOther, "its subject is " + otherImage},
		{"worker-other-repository", ofElsewhere, "it is in repository " + reg.Host + "/attacker/worker, not the image's " + reg.Host + "/strata/worker"},
	} {
		_, err := download(tc.build)
		if err == nil {
			t.Errorf("boot-disk %s: downloaded %s, a disk of another image than its %s", tc.build, tc.artifact.Artifact, image)
			continue
		}
		for _, w := range []string{"MachineOSBuild " + tc.build, image, tc.artifact.Artifact, "not a boot disk of", tc.want} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("boot-disk %s: %v; want it to say %q", tc.build, err, w)
			}
		}
	}
}
