//go:build vm

package vm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/scheme"
	"github.com/strata-dev/strata/test/testenv"
	"github.com/strata-dev/strata/test/vm"
)

const (
	apiserverPort = 6443
	vmPool        = "vm-rollout"
)

// poolLabel is the label of a pool's VMs and MachineConfigs.
func poolLabel(pool string) string { return "strata.dev/" + pool }

// factsProbe is the config drive's probe for the rollout: what the
// scenarios assert on, read in the guest at every multi-user.
const factsProbe = `#!/bin/bash
echo "cmdline: $(cat /proc/cmdline)"
echo "enabled: $(systemctl is-active strata-vm-enabled.service)"
echo "masked: $(systemctl is-active strata-vm-masked.service) $(systemctl is-enabled strata-vm-masked.service 2>&1)"
echo "etc: $(cat /etc/strata-vm.conf 2>&1)"
echo "var: $(cat /var/lib/strata-vm/data 2>&1)"
ostree admin config-diff 2>&1 | sed 's/^/config-diff: /'
echo "bootc: $(bootc status --format=json 2>&1 | tr -d '\n')"
`

// fact is the value of the probe's line "key: value" ("" when absent).
func fact(m vm.Marker, key string) string {
	for _, l := range m.Probe {
		if v, ok := strings.CutPrefix(l, key+": "); ok {
			return v
		}
	}
	return ""
}

// cluster returns the test cluster's kubeconfig and a client of it.
func cluster(t *testing.T) (string, client.Client) {
	t.Helper()
	kc := os.Getenv("KUBECONFIG")
	if kc == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		kc = filepath.Join(root, ".infra", "cluster", "kubeconfig")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(rc, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return kc, c
}

// vmConfig is pool's MachineConfig: an /etc and a /var file holding
// version, an enabled and a masked unit, and the kernel argument
// strata.vm=version.
func vmConfig(pool, version string) *v1alpha1.MachineConfig {
	ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},
	"storage":{"files":[
		{"path":"/etc/strata-vm.conf","mode":420,"contents":{"source":"data:,%[1]s"}},
		{"path":"/var/lib/strata-vm/data","mode":384,"contents":{"source":"data:,%[1]s"}}]},
	"systemd":{"units":[
		{"name":"strata-vm-enabled.service","enabled":true,"contents":"[Unit]\nDescription=enabled by the MachineConfig\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
		{"name":"strata-vm-masked.service","mask":true}]}}`, version)
	return &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "50-" + pool, Labels: map[string]string{poolLabel(pool): "true"}},
		Spec: v1alpha1.MachineConfigSpec{
			Config:          runtime.RawExtension{Raw: []byte(ign)},
			KernelArguments: []string{"strata.vm=" + version},
		},
	}
}

// TestRealRollout is issue 22's point 3 on one VM: a MachineConfig change
// reboots the VM once into the built image, with the pool's kernel
// arguments, units, /etc and /var files; deleting the MachineOSConfig
// reboots it back into its original deployment.
func TestRealRollout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	kc, c := cluster(t)

	start := time.Now()
	disk, base := vm.Disk(t, vm.BaseImage())
	node := vm.JoinNode(t, ctx, kc, map[string]string{poolLabel(vmPool): "true"})
	v := vm.Start(t, vm.Config{
		Disk:        disk,
		Ports:       map[int]int{apiserverPort: apiserverPort, registryPort: registryPort},
		ConfigDrive: append(node.ConfigDrive, vm.File{Name: "probe", Data: []byte(factsProbe), Mode: 0o755}),
	})
	first := v.WaitMarker(t, "multi-user", 6*time.Minute)
	t.Logf("boot: multi-user in %s (%s)", time.Since(start).Round(time.Second), first.Deployment)
	waitNode(t, ctx, c, node.Name, base, false)
	t.Logf("boot: the daemon reports the base %s after %s", base, time.Since(start).Round(time.Second))

	// The pool, its MachineConfig, and the MachineOSConfig that layers it
	// on the VM base.
	mc := vmConfig(vmPool, "one")
	mosc := layeredPool(t, ctx, c, vmPool, base, mc, nil)

	// The change: one real reboot into the built image.
	start = time.Now()
	build, render := waitBuilt(t, ctx, c, vmPool, mc.Name, "")
	image := build.Status.DigestedImagePushSpec
	t.Logf("switch: image %s built in %s", image, time.Since(start).Round(time.Second))
	second := v.WaitMarker(t, "multi-user", 10*time.Minute)
	t.Logf("switch: rebooted into %s after %s", second.Deployment, time.Since(start).Round(time.Second))
	if second.BootID == first.BootID || second.Deployment == first.Deployment {
		t.Fatalf("the VM did not reboot into a new deployment: before %+v, after %+v", first, second)
	}
	waitNode(t, ctx, c, node.Name, image, true)
	if !slices.Contains(strings.Fields(fact(second, "cmdline")), "strata.vm=one") {
		t.Errorf("/proc/cmdline lacks the pool's kernel argument strata.vm=one: %q", fact(second, "cmdline"))
	}
	if got := fact(second, "enabled"); got != "active" {
		t.Errorf("strata-vm-enabled.service is %q, want active", got)
	}
	if got := fact(second, "masked"); !strings.HasPrefix(got, "inactive masked") {
		t.Errorf("strata-vm-masked.service is %q, want inactive and masked", got)
	}
	if got := fact(second, "etc"); got != "one" {
		t.Errorf("/etc/strata-vm.conf is %q, want the MachineConfig's content", got)
	}
	for _, l := range second.Probe {
		if strings.HasPrefix(l, "config-diff: ") && strings.Contains(l, "strata-vm.conf") {
			t.Errorf("/etc/strata-vm.conf is a local modification: %q", l)
		}
	}
	if got := fact(second, "var"); got != "one" {
		t.Errorf("/var/lib/strata-vm/data is %q after the reboot, want what the daemon wrote", got)
	}
	// Exactly one reboot: no other boot has reported since.
	if n := len(v.Markers()); n != 2 {
		t.Errorf("the VM booted %d times, want 2 (one reboot): %+v", n, v.Markers())
	}

	// Back to the original deployment when the pool stops being layered.
	start = time.Now()
	if err := c.Delete(ctx, mosc); err != nil {
		t.Fatal(err)
	}
	third := v.WaitMarker(t, "multi-user", 10*time.Minute)
	t.Logf("revert: back on %s after %s", third.Deployment, time.Since(start).Round(time.Second))
	if !strings.HasPrefix(third.Deployment, strings.Split(first.Deployment, ".")[0]) {
		t.Errorf("after the revert the VM booted %s, want the original commit %s", third.Deployment, first.Deployment)
	}
	waitNode(t, ctx, c, node.Name, base, true)

	// The failure: an image whose daemon cannot start (the MachineConfig
	// masks it) is rolled back by the node's boot check alone: no daemon
	// runs on it, so nothing in the cluster can help.
	start = time.Now()
	broken := vmConfig(vmPool, "two")
	if err := c.Get(ctx, client.ObjectKeyFromObject(mc), mc); err != nil {
		t.Fatal(err)
	}
	mc.Spec = broken.Spec
	mc.Spec.Config.Raw = []byte(strings.Replace(string(mc.Spec.Config.Raw), `{"name":"strata-vm-masked.service","mask":true}`,
		`{"name":"strata-vm-masked.service","mask":true},{"name":"strata-daemon.service","mask":true}`, 1))
	if err := c.Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	// The MachineOSConfig builds the new render only.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p := &v1alpha1.MachineConfigPool{}
		err := c.Get(ctx, client.ObjectKey{Name: vmPool}, p)
		return err == nil && p.Status.Configuration.Name != "" && p.Status.Configuration.Name != render, err
	})
	if err != nil {
		t.Fatalf("the pool does not render the broken MachineConfig: %v", err)
	}
	// Without a MachineOSConfig only /var-bound files reach the node, so
	// the mask waits for the image built from it.
	again := &v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: mosc.Name}, Spec: *mosc.Spec.DeepCopy()}
	if err := c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	bad, _ := waitBuilt(t, ctx, c, vmPool, mc.Name, render)
	fourth := v.WaitMarker(t, "multi-user", 10*time.Minute)
	if fourth.Deployment == third.Deployment {
		t.Fatalf("the VM did not boot the broken image %s: %+v", bad.Status.DigestedImagePushSpec, fourth)
	}
	fifth := v.WaitMarker(t, "multi-user", 10*time.Minute)
	t.Logf("boot check: rolled back to %s after %s", fifth.Deployment, time.Since(start).Round(time.Second))
	if strings.Split(fifth.Deployment, ".")[0] != strings.Split(third.Deployment, ".")[0] {
		t.Errorf("the boot check brought the VM to %s, want the deployment before the broken image, %s", fifth.Deployment, third.Deployment)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, n); err != nil {
			return false, err
		}
		return strings.Contains(n.Annotations[v1alpha1.ReasonAnnotation], "boot check"), nil
	})
	if err != nil {
		t.Errorf("the daemon, back on the previous image, does not report the boot check's verdict: %v", err)
	}
}

// layeredPool creates the pool of the VMs labelled poolLabel(pool), its
// MachineConfig mc, and the MachineOSConfig (named pool) that layers the
// pool's configuration on base, pushes it to the test registry and, with
// disk, makes its boot disk; it returns the MachineOSConfig. All are
// deleted when the test ends.
func layeredPool(t *testing.T, ctx context.Context, c client.Client, pool, base string, mc *v1alpha1.MachineConfig, disk *v1alpha1.BootDisk) *v1alpha1.MachineOSConfig {
	t.Helper()
	for name, auth := range map[string]string{"vm-push": "dm0tcHVzaDp2bQ==", "vm-pull": "dm0tcHVsbDp2bQ=="} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: vm.DaemonNamespace, Name: name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, c, s, func() error {
			s.Type = corev1.SecretTypeDockerConfigJson
			s.Data = map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"127.0.0.1:5000":{"auth":"` + auth + `"}}}`)}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	label := map[string]string{poolLabel(pool): "true"}
	p := &v1alpha1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.MachineConfigPoolSpec{
			NodeSelector:          &metav1.LabelSelector{MatchLabels: label},
			MachineConfigSelector: &metav1.LabelSelector{MatchLabels: label},
			MaxUnavailable:        ptr.To(intstr.FromInt32(1)),
			// The boot check waits this long before it rolls back.
			HealthCheckTimeout: &metav1.Duration{Duration: 90 * time.Second},
			DrainTimeout:       &metav1.Duration{Duration: 5 * time.Minute},
		},
	}
	mosc := &v1alpha1.MachineOSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: pool},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
			BaseImagePullSpec:       base,
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: "vm-push"},
			RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "vm-pull"},
			RenderedImagePushSpec:   "127.0.0.1:5000/strata/" + pool + ":latest",
			BootDisk:                disk,
		},
	}
	create(t, ctx, c, p, mc, mosc)
	return mosc
}

// create creates the objects and deletes them when the test ends.
func create(t *testing.T, ctx context.Context, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = client.IgnoreNotFound(c.Delete(context.Background(), o)) })
	}
}

// waitBuilt waits until pool renders a configuration other than
// notRender that merges mc, and its MachineOSConfig's build of that
// configuration succeeds; it returns the build and the configuration.
// (The pool's first renders may lack mc, and their builds are not the
// image the node ends on.)
func waitBuilt(t *testing.T, ctx context.Context, c client.Client, pool, mc, notRender string) (build *v1alpha1.MachineOSBuild, render string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		p := &v1alpha1.MachineConfigPool{}
		if err := c.Get(ctx, client.ObjectKey{Name: pool}, p); err != nil {
			return false, err
		}
		render = p.Status.Configuration.Name
		if render == "" || render == notRender || !slices.ContainsFunc(p.Status.Configuration.Source, func(r corev1.ObjectReference) bool { return r.Name == mc }) {
			return false, nil
		}
		m := &v1alpha1.MachineOSConfig{}
		if err := c.Get(ctx, client.ObjectKey{Name: pool}, m); err != nil || m.Status.MachineOSBuild == nil {
			return false, client.IgnoreNotFound(err)
		}
		b := &v1alpha1.MachineOSBuild{}
		if err := c.Get(ctx, client.ObjectKey{Name: m.Status.MachineOSBuild.Name}, b); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildFailed) {
			return false, fmt.Errorf("build %s failed: %+v", b.Name, b.Status.Failure)
		}
		build = b
		return b.Spec.MachineConfig.Name == render && meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildSucceeded), nil
	})
	if err != nil {
		t.Fatalf("the pool's image: %v", err)
	}
	return build, render
}

// waitNode waits until the VM's daemon reports image as current (and
// its update Done, with done).
func waitNode(t *testing.T, ctx context.Context, c client.Client, name, image string, done bool) {
	t.Helper()
	var a map[string]string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return false, err
		}
		a = n.Annotations
		return a[v1alpha1.CurrentImageAnnotation] == image && (!done || a[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDone), nil
	})
	if err != nil {
		t.Fatalf("node %s does not report %s Done (current %q, state %q: %q): %v", name, image,
			a[v1alpha1.CurrentImageAnnotation], a[v1alpha1.StateAnnotation], a[v1alpha1.ReasonAnnotation], err)
	}
}
