package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/hostfs"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/bootcsim/sigverify"
	"github.com/strata-dev/strata/test/testregistry"
)

// simHost is the bootc simulator (test/bootcsim) as the daemon's bootc
// and machine: images really pulled from a registry and deployed into an
// ostree sysroot, staged, rolled back and booted as bootc does. Reboot
// only leaves the request, as on a simulated node; the test boots.
type simHost struct {
	t   *testing.T
	sim *bootcsim.Sim

	mu                           sync.Mutex
	switches, rollbacks, reboots int
	softReboots                  int
	// statuses counts `bootc status` runs.
	statuses int
}

// SoftReboot is `bootc upgrade --from-downloaded --apply
// --soft-reboot=required`, which leaves a soft reboot request for the
// harness (boot).
func (h *simHost) SoftReboot(ctx context.Context) error {
	h.mu.Lock()
	h.softReboots++
	h.mu.Unlock()
	return h.sim.Upgrade(ctx, bootcsim.UpgradeOptions{FromDownloaded: true, Apply: true, SoftReboot: bootc.SoftRebootRequired})
}

// Capabilities are those of the simulated bootc release.
func (h *simHost) Capabilities(context.Context) (bootc.Capabilities, error) {
	v, err := h.sim.BootcVersion()
	if err != nil {
		return bootc.Capabilities{}, err
	}
	return bootc.Capabilities{SwitchDownloadOnly: v.SwitchDownloadOnly(), UpgradeDownloadOnly: true, SoftReboot: true, EnforceSigPolicy: true}, nil
}

func (h *simHost) SwitchWith(ctx context.Context, image string, o bootc.SwitchOptions) error {
	h.mu.Lock()
	h.switches++
	h.mu.Unlock()
	_, err := h.sim.Switch(ctx, image, bootcsim.SwitchOptions{Transport: bootc.TransportRegistry, DownloadOnly: o.DownloadOnly,
		Apply: o.Apply.Reboot, SoftReboot: o.Apply.SoftReboot, EnforceSigPolicy: o.EnforceSigPolicy})
	return err
}

func (h *simHost) LockStaged(ctx context.Context) error {
	return h.sim.Upgrade(ctx, bootcsim.UpgradeOptions{DownloadOnly: true})
}

func (h *simHost) ApplyDownloaded(ctx context.Context, a bootc.Apply) error {
	return h.sim.Upgrade(ctx, bootcsim.UpgradeOptions{FromDownloaded: true, Apply: a.Reboot, SoftReboot: a.SoftReboot})
}

// SoftRebootCount is systemd's SoftRebootsCount of the simulated node.
func (h *simHost) SoftRebootCount(context.Context) (int, error) { return h.sim.SoftReboots() }

func (h *simHost) Status(ctx context.Context) (*bootc.Host, error) {
	h.mu.Lock()
	h.statuses++
	h.mu.Unlock()
	// Through bootc's JSON, as the daemon reads the real one.
	st, err := h.sim.Status(ctx)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return bootc.Parse(data)
}

func (h *simHost) Switch(ctx context.Context, image string) error {
	h.mu.Lock()
	h.switches++
	h.mu.Unlock()
	_, err := h.sim.Switch(ctx, image, bootcsim.SwitchOptions{Transport: bootc.TransportRegistry})
	return err
}

func (h *simHost) Rollback(ctx context.Context) error {
	h.mu.Lock()
	h.rollbacks++
	h.mu.Unlock()
	return h.sim.Rollback(ctx)
}

func (h *simHost) BootID() (string, error) { return h.sim.BootID() }

func (h *simHost) Reboot(context.Context) error {
	h.mu.Lock()
	h.reboots++
	h.mu.Unlock()
	return h.sim.RequestReboot()
}

func (h *simHost) CheckHealth(ctx context.Context) error { return h.sim.Health(ctx) }

// boot performs the reboot requested, a soft one when that is what was
// asked for.
func (h *simHost) boot() {
	h.t.Helper()
	kind, ok, err := h.sim.RebootRequest()
	if err != nil {
		h.t.Fatal(err)
	}
	if ok && kind == bootcsim.RebootSoft {
		if err := h.sim.SoftReboot(context.Background()); err != nil {
			h.t.Fatalf("simulated soft reboot: %v", err)
		}
		return
	}
	if err := h.sim.Reboot(context.Background()); err != nil {
		h.t.Fatalf("simulated reboot: %v", err)
	}
}

func (h *simHost) counts() counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return counts{h.switches, h.rollbacks, h.reboots, h.softReboots, h.statuses}
}

// entries are bootc status's staged and booted digests.
func (h *simHost) entries() (staged, booted string) {
	h.t.Helper()
	st, err := h.Status(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return st.Status.Staged.Digest(), st.Status.Booted.Digest()
}

// newSimRig is a rig whose node is a bootc simulator installed with
// image one; it returns the rig and images one and two.
func newSimRig(t *testing.T) (r *rig, one, two string) {
	t.Helper()
	reg := testregistry.Start(t, "")
	push := func(tag, version string) string {
		img, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, map[string]string{"etc/strata-sim-test": version + "\n"}))
		if err != nil {
			t.Fatal(err)
		}
		return reg.Push(t, "strata/os:"+tag, img)
	}
	one, two = push("one", "1"), push("two", "2")

	r = newRig(t)
	r.bootSimulator(one)
	return r, one, two
}

// varConfig creates a rendered MachineConfig whose one node item is a
// /var file with marker.
func (r *rig) varConfig(marker string) string {
	r.t.Helper()
	ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/var/lib/strata-test/marker","mode":420,"overwrite":true,"contents":{"source":"data:,%s"}}]}}`, marker)
	name := fmt.Sprintf("rendered-%s-%s", r.name, marker)
	mc := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}}}
	if err := env.Client.Create(r.ctx, mc); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mc) })
	return name
}

// TestRevertOnTheSimulator (issue 20 point 5) reproduces the revert on
// the bootc simulator: desired set back to the booted image while the new
// one is staged leaves the desired image staged, if anything, when the
// node reports Done, and the next reboot, whatever asks for it, boots it.
func TestRevertOnTheSimulator(t *testing.T) {
	r, one, two := newSimRig(t)
	config := r.varConfig("one")
	r.desire(two, config)
	r.sync() // staged, drain asked
	if staged, _ := r.sim.entries(); staged != bootc.DigestOf(two) {
		t.Fatalf("staged %q before the revert, want %s", staged, bootc.DigestOf(two))
	}
	key := r.desire(one, config)
	r.converge()
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentImageAnnotation:  one,
		v1alpha1.DesiredDrainAnnotation:  v1alpha1.UncordonRequestPrefix + key,
		v1alpha1.CurrentConfigAnnotation: config,
	})
	if staged, _ := r.sim.entries(); staged != "" && staged != bootc.DigestOf(one) {
		t.Fatalf("reported Done with %s staged, desired %s", staged, bootc.DigestOf(one))
	}
	// An unrelated reboot (a power cut, another reboot manager).
	r.reboot()
	r.sync()
	if _, booted := r.sim.entries(); booted != bootc.DigestOf(one) {
		t.Errorf("an unrelated reboot booted %s, want %s", booted, bootc.DigestOf(one))
	}
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.CurrentImageAnnotation: one})
}

// TestChangedWhileVerifyingOnTheSimulator (issue 20 point 5): an image
// that fails its health check after its reboot is rolled back on the
// simulator even though the desired pair changed while it was verified;
// the new pair is acted on after the verdict.
func TestChangedWhileVerifyingOnTheSimulator(t *testing.T) {
	r, one, two := newSimRig(t)
	config := r.varConfig("one")
	r.desire(two, config)
	r.sync()
	r.applyDrain()
	if !r.sync().Rebooting {
		t.Fatal("no reboot")
	}
	if err := r.sim.sim.FailBoot(two); err != nil {
		t.Fatal(err)
	}
	r.reboot()
	r.sync() // verifying, unhealthy, within the timeout
	r.desire(one, r.varConfig("two"))
	r.sync()
	if u := r.record().Update; u == nil || u.Image != two || u.Phase != PhaseVerifying {
		t.Fatalf("the verification was dropped for the new desired pair: state file update %+v", u)
	}
	r.clock = r.clock.Add(2 * time.Minute)
	r.converge()
	if got := r.sim.counts(); got.rollbacks != 1 || got.reboots != 2 {
		t.Errorf("bootc and reboot calls %+v, want one rollback and two reboots", got)
	}
	if _, booted := r.sim.entries(); booted != bootc.DigestOf(one) {
		t.Errorf("booted %s, want %s", booted, bootc.DigestOf(one))
	}
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
		v1alpha1.CurrentImageAnnotation: one,
	})
	if got := r.marker(); got != "two" {
		t.Errorf("marker %q: the new pair's config was not applied after the verdict", got)
	}
}

// bootSimulator gives the rig a node on the bootc simulator, a real
// ostree sysroot in a temporary directory booted from image, and a
// daemon on it.
func (r *rig) bootSimulator(image string) {
	t := r.t
	t.Helper()
	r.dir = filepath.Join(t.TempDir(), "node")
	t.Cleanup(func() {
		if err := bootcsim.Cleanup(r.dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	sim, err := bootcsim.New(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	sim.VerifySignatures = sigverify.Verify
	if err := sim.Init(r.ctx, image); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	r.root, r.sim = root, &simHost{t: t, sim: sim}
	r.d = r.newDaemon()
}
