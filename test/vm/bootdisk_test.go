//go:build vm

package vm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/diskartifact"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/vm"
)

// diskPool is TestFreshNodeFromBootDisk's pool: not TestRealRollout's, so
// that no build of the other test's is taken for this one's.
const diskPool = "vm-bootdisk"

// TestFreshNodeFromBootDisk is issue 22's point 4: the boot disk a
// MachineOSBuild publishes boots a new node straight into the pool's
// image, with its /etc and kernel arguments, and the node's daemon finds
// nothing to do: one boot, no update, no reboot.
func TestFreshNodeFromBootDisk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	kc, c := cluster(t)
	// The pool's build needs the base by digest, not a disk of it.
	base := vm.DigestRef(t, vm.BaseImage())

	// The base's content is about 350 MB: 2 GiB leave room for the
	// daemon's /var and a later update's deployment, and keep the Job and
	// the download short.
	start := time.Now()
	mc := vmConfig(diskPool, "disk")
	layeredPool(t, ctx, c, diskPool, base, mc, &v1alpha1.BootDisk{SizeMiB: 2048})
	build, _ := waitBuilt(t, ctx, c, diskPool, mc.Name, "")
	image := build.Status.DigestedImagePushSpec
	t.Logf("build: image %s in %s", image, time.Since(start).Round(time.Second))
	start = time.Now()
	disk := waitBootDisk(t, ctx, c, build.Name)
	t.Logf("boot disk: %s (%d MiB, %d MiB compressed) published in %s (the Job: %v)", disk.Artifact, disk.SizeMiB,
		disk.CompressedSize>>20, time.Since(start).Round(time.Second), disk.Duration)
	if disk.Image != image {
		t.Errorf("status.bootDisk.image is %s, want the build's image %s", disk.Image, image)
	}

	start = time.Now()
	raw := filepath.Join(t.TempDir(), diskartifact.FileName)
	got, err := diskartifact.Download(ctx, registry.Client{Insecure: []string{"127.0.0.1:5000"}}, disk.Artifact, authn.DefaultKeychain, raw, nil)
	if err != nil {
		t.Fatalf("download the boot disk: %v", err)
	}
	t.Logf("download: %d MiB in %s", got.CompressedSize>>20, time.Since(start).Round(time.Second))
	if got.Image != image || got.RawDigest != disk.RawDigest || got.Size != int64(disk.SizeMiB)<<20 {
		t.Errorf("the artifact holds %+v, want a disk of %s of %d MiB with digest %s", got, image, disk.SizeMiB, disk.RawDigest)
	}

	// A new node of the pool boots the disk.
	start = time.Now()
	node := vm.JoinNode(t, ctx, kc, map[string]string{poolLabel(diskPool): "true"})
	v := vm.Start(t, vm.Config{
		Disk:        raw,
		Ports:       map[int]int{apiserverPort: apiserverPort, registryPort: registryPort},
		ConfigDrive: append(node.ConfigDrive, vm.File{Name: "probe", Data: []byte(factsProbe), Mode: 0o755}),
	})
	first := v.WaitMarker(t, "multi-user", 6*time.Minute)
	t.Logf("boot: multi-user in %s (%s)", time.Since(start).Round(time.Second), first.Deployment)
	if d := bootedDigest(t, first); d != digestOf(t, image) {
		t.Errorf("the first boot runs image digest %q, want the pool's image %s", d, image)
	}
	if got := fact(first, "etc"); got != "disk" {
		t.Errorf("/etc/strata-vm.conf is %q at the first boot, want the MachineConfig's content", got)
	}
	if !slices.Contains(strings.Fields(fact(first, "cmdline")), "strata.vm=disk") {
		t.Errorf("/proc/cmdline lacks the pool's kernel argument strata.vm=disk: %q", fact(first, "cmdline"))
	}
	if got := fact(first, "enabled"); got != "active" {
		t.Errorf("strata-vm-enabled.service is %q, want active", got)
	}

	waitNode(t, ctx, c, node.Name, image, true)
	t.Logf("boot: the daemon reports the pool's image Done after %s", time.Since(start).Round(time.Second))
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable {
		t.Errorf("node %s is cordoned: the daemon updated a node that needed nothing", node.Name)
	}
	// The VM never rebooted.
	if ms := v.Markers(); len(ms) != 1 || ms[0].BootID != first.BootID {
		t.Errorf("the VM booted %d times, want once: %+v", len(ms), ms)
	}
}

// waitBootDisk waits until the build's BootDisk condition is True and
// returns its status.bootDisk; the condition's failure fails the test.
func waitBootDisk(t *testing.T, ctx context.Context, c client.Client, build string) *v1alpha1.BootDiskStatus {
	t.Helper()
	var b v1alpha1.MachineOSBuild
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: build}, &b); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildBootDisk)
		if cond != nil && cond.Reason == v1alpha1.ReasonBootDiskFailed {
			return false, fmt.Errorf("failed: %s (status.bootDisk %+v)", cond.Message, b.Status.BootDisk)
		}
		return cond != nil && cond.Status == "True" && b.Status.BootDisk != nil && b.Status.BootDisk.Artifact != "", nil
	})
	if err != nil {
		t.Fatalf("boot disk of build %s: %v (conditions %+v)", build, err, b.Status.Conditions)
	}
	return b.Status.BootDisk
}

// bootedDigest is the booted image's digest in the probe's bootc status.
func bootedDigest(t *testing.T, m vm.Marker) string {
	t.Helper()
	var h bootc.Host
	if err := json.Unmarshal([]byte(fact(m, "bootc")), &h); err != nil {
		t.Fatalf("the guest's bootc status: %v: %q", err, fact(m, "bootc"))
	}
	if h.Status.Booted == nil || h.Status.Booted.Image == nil {
		t.Fatalf("the guest's bootc status has no booted image: %q", fact(m, "bootc"))
	}
	return h.Status.Booted.Image.ImageDigest
}

// digestOf is the digest of an image reference by digest.
func digestOf(t *testing.T, ref string) string {
	t.Helper()
	d, err := name.NewDigest(ref)
	if err != nil {
		t.Fatalf("image %q is not by digest: %v", ref, err)
	}
	return d.DigestStr()
}
