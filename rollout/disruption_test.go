package rollout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/disruption"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/unitaction"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/testregistry"
)

// layeredSim is a simulated node whose images are laid out as Strata
// builds them: a base, perhaps an admin stage, and a configuration layer
// on top, whose history entry names it.
type layeredSim struct {
	*rig
	reg *testregistry.Registry
}

// image pushes busybox, the admin layers, and a configuration layer of
// files, and returns its pull spec by digest.
func (l *layeredSim) image(tag string, admin []v1.Layer, files map[string]string) string {
	l.t.Helper()
	img := testregistry.Busybox(l.t)
	for _, a := range admin {
		var err error
		if img, err = mutate.Append(img, mutate.Addendum{Layer: a, History: v1.History{CreatedBy: "RUN dnf install -y x"}}); err != nil {
			l.t.Fatal(err)
		}
	}
	img, err := mutate.Append(img, mutate.Addendum{
		Layer:   testregistry.FilesLayer(l.t, files),
		History: v1.History{CreatedBy: v1alpha1.ConfigLayerCreatedBy + tag},
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return l.reg.Push(l.t, "strata/os:"+tag, img)
}

// newLayeredSim is a simulator node booted on image one (busybox, the
// configuration layer with /etc/chrony.conf "a") with its config applied.
func newLayeredSim(t *testing.T) *layeredSim {
	t.Helper()
	reg := testregistry.Start(t, "")
	r := newRig(t)
	l := &layeredSim{rig: r, reg: reg}
	one := l.image("one", nil, map[string]string{"etc/chrony.conf": "a\n"})
	r.bootSimulator(one)
	configA := l.etcConfig("a", nil)
	r.desire(one, configA)
	r.converge()
	if got := r.record().CurrentConfig; got != configA {
		t.Fatalf("current config %q, want %q", got, configA)
	}
	return l
}

func (r *rig) newDaemonWithImages(reg *testregistry.Registry) {
	r.images = &RegistryImages{Registry: registry.Client{Insecure: []string{reg.Host}}}
	r.soft, r.lock = r.sim, r.sim
	r.restart()
}

// etcConfig creates a rendered config writing /etc/chrony.conf with
// content, plus kernel arguments.
func (r *rig) etcConfig(content string, kargs []string) string {
	r.t.Helper()
	ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/chrony.conf","mode":420,"overwrite":true,"contents":{"source":"data:,%s%%0A"}}]}}`, content)
	name := fmt.Sprintf("rendered-%s-chrony-%s-%d", r.name, content, len(kargs))
	mc := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MachineConfigSpec{
		Config: runtime.RawExtension{Raw: []byte(ign)}, KernelArguments: kargs}}
	if err := env.Client.Create(r.ctx, mc); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mc) })
	return name
}

// clusterPolicy creates the `cluster` MachineConfiguration with a policy
// for /etc/chrony.conf.
func clusterPolicy(t *testing.T, r *rig, actions ...v1alpha1.NodeDisruptionPolicyAction) *v1alpha1.MachineConfiguration {
	t.Helper()
	return clusterPolicyFiles(t, r, v1alpha1.NodeDisruptionPolicyFile{Path: "/etc/chrony.conf", Actions: actions})
}

// clusterPolicyFiles creates the `cluster` MachineConfiguration with
// policies for files.
func clusterPolicyFiles(t *testing.T, r *rig, files ...v1alpha1.NodeDisruptionPolicyFile) *v1alpha1.MachineConfiguration {
	t.Helper()
	mc := &v1alpha1.MachineConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.MachineConfigurationName},
		Spec:       v1alpha1.MachineConfigurationSpec{NodeDisruptionPolicy: v1alpha1.NodeDisruptionPolicyConfig{Files: files}},
	}
	if err := env.Client.Create(r.ctx, mc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mc) })
	return mc
}

// decided runs the update to (image, config) up to its drain request and
// returns the decision recorded, checking that the annotation shows it.
func (l *layeredSim) decided(image, config string) *DisruptionRecord {
	l.t.Helper()
	key := l.desire(image, config)
	l.sync()
	if got := l.ann(v1alpha1.DesiredDrainAnnotation); got != v1alpha1.DrainRequestPrefix+key {
		l.t.Fatalf("desiredDrain %q after the first sync, want the drain of %s", got, key)
	}
	d := l.record().Disruption
	if d == nil || d.Key != key {
		l.t.Fatalf("state file disruption %+v, want one for %s", d, key)
	}
	if got := l.ann(v1alpha1.DisruptionAnnotation); got != d.summary() {
		l.t.Errorf("disruption annotation %q, want %q", got, d.summary())
	}
	return d
}

func (l *layeredSim) stagedCapable() bool {
	l.t.Helper()
	st, err := l.sim.Status(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	return st.Status.Staged != nil && st.Status.Staged.SoftRebootCapable
}

// TestDisruptionDecided (issue 21 point 2): the daemon decides what an
// image update costs from the configs' changes, the images' layers below
// the configuration layer, bootc's soft-reboot capability of the staged
// deployment and the cluster's policy, and shows it.
func TestDisruptionDecided(t *testing.T) {
	t.Run("config layer only, no policy: soft reboot", func(t *testing.T) {
		l := newLayeredSim(t)
		l.newDaemonWithImages(l.reg)
		two := l.image("two", nil, map[string]string{"etc/chrony.conf": "b\n"})
		d := l.decided(two, l.etcConfig("b", nil))
		if !l.stagedCapable() {
			t.Fatal("the simulator does not report the staged deployment soft-reboot capable")
		}
		if d.Kind != disruption.SoftReboot || !strings.Contains(d.Reason, "/etc/chrony.conf") {
			t.Errorf("decision %+v, want a soft reboot for /etc/chrony.conf", d)
		}
	})
	t.Run("live with an action but no systemctl: a full reboot, saying why", func(t *testing.T) {
		l := newLayeredSim(t)
		l.newDaemonWithImages(l.reg)
		clusterPolicy(t, l.rig, v1alpha1.NodeDisruptionPolicyAction{Type: v1alpha1.RestartAction,
			Restart: &v1alpha1.NodeDisruptionPolicyService{ServiceName: "chronyd.service"}})
		two := l.image("two", nil, map[string]string{"etc/chrony.conf": "b\n"})
		d := l.decided(two, l.etcConfig("b", nil))
		if d.Kind != disruption.Reboot || !strings.Contains(d.Reason, "policy /etc/chrony.conf: Restart chronyd.service") ||
			!strings.Contains(d.Reason, "no systemctl") {
			t.Errorf("decision %+v, want the live decision fallen back to a full reboot", d)
		}
	})
	t.Run("the merged status is used when it is current", func(t *testing.T) {
		l := newLayeredSim(t)
		l.newDaemonWithImages(l.reg)
		mc := clusterPolicy(t, l.rig, v1alpha1.NodeDisruptionPolicyAction{Type: v1alpha1.NoneAction})
		// The controller's merged status says Reboot (not what the spec
		// says: the daemon must read the status when it is current).
		mc.Status.ObservedGeneration = mc.Generation
		mc.Status.NodeDisruptionPolicyStatus.ClusterPolicies.Files = []v1alpha1.NodeDisruptionPolicyFile{{
			Path: "/etc/chrony.conf", Actions: []v1alpha1.NodeDisruptionPolicyAction{{Type: v1alpha1.RebootAction}}}}
		if err := env.Client.Status().Update(l.ctx, mc); err != nil {
			t.Fatal(err)
		}
		two := l.image("two", nil, map[string]string{"etc/chrony.conf": "b\n"})
		if d := l.decided(two, l.etcConfig("b", nil)); d.Kind != disruption.Reboot {
			t.Errorf("decision %+v, want the status's Reboot", d)
		}
	})
	t.Run("a new admin stage: full reboot", func(t *testing.T) {
		l := newLayeredSim(t)
		l.newDaemonWithImages(l.reg)
		clusterPolicy(t, l.rig, v1alpha1.NodeDisruptionPolicyAction{Type: v1alpha1.NoneAction})
		admin := testregistry.FilesLayer(t, map[string]string{"usr/lib/admin": "x\n"})
		two := l.image("two", []v1.Layer{admin}, map[string]string{"etc/chrony.conf": "b\n"})
		d := l.decided(two, l.etcConfig("b", nil))
		if d.Kind != disruption.Reboot || !strings.Contains(d.Reason, "below its configuration layer") {
			t.Errorf("decision %+v, want a full reboot for the changed image", d)
		}
	})
	t.Run("kernel arguments: full reboot though bootc says capable", func(t *testing.T) {
		l := newLayeredSim(t)
		l.newDaemonWithImages(l.reg)
		clusterPolicy(t, l.rig, v1alpha1.NodeDisruptionPolicyAction{Type: v1alpha1.NoneAction})
		two := l.image("two", nil, map[string]string{"etc/chrony.conf": "b\n"})
		d := l.decided(two, l.etcConfig("b", []string{"quiet"}))
		if !l.stagedCapable() {
			t.Fatal("the simulator does not report the staged deployment soft-reboot capable")
		}
		if d.Kind != disruption.Reboot || !strings.Contains(d.Reason, "kernel arguments") {
			t.Errorf("decision %+v, want a full reboot for the kernel arguments", d)
		}
	})
	t.Run("no image reader: full reboot, saying why", func(t *testing.T) {
		l := newLayeredSim(t)
		two := l.image("two", nil, map[string]string{"etc/chrony.conf": "b\n"})
		d := l.decided(two, l.etcConfig("b", nil))
		if d.Kind != disruption.Reboot || !strings.Contains(d.Reason, "reads no images") {
			t.Errorf("decision %+v, want a full reboot saying the daemon reads no images", d)
		}
	})
}

// liveRig is a layered simulator whose daemon reads images and records
// its systemctl calls; fail, when set, fails the call whose arguments it
// names.
type liveRig struct {
	*layeredSim
	mu      sync.Mutex
	calls   []string
	fail    string
	one     string
	configA string
}

func newLiveRig(t *testing.T) *liveRig {
	t.Helper()
	l := &liveRig{layeredSim: newLayeredSim(t)}
	l.one, l.configA = l.ann(v1alpha1.CurrentImageAnnotation), l.ann(v1alpha1.CurrentConfigAnnotation)
	l.units = &unitaction.Systemd{Systemctl: []string{"systemctl"}, Runner: unitaction.RunnerFunc(func(_ context.Context, argv []string) ([]byte, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		call := strings.Join(argv[1:], " ")
		l.calls = append(l.calls, call)
		if call == l.fail {
			return []byte("Job for chronyd.service failed"), errors.New("exit status 1")
		}
		return nil, nil
	})}
	l.newDaemonWithImages(l.reg)
	restart := []v1alpha1.NodeDisruptionPolicyAction{{Type: v1alpha1.RestartAction,
		Restart: &v1alpha1.NodeDisruptionPolicyService{ServiceName: "chronyd.service"}}}
	clusterPolicyFiles(t, l.rig,
		v1alpha1.NodeDisruptionPolicyFile{Path: "/etc/chrony.conf", Actions: restart},
		v1alpha1.NodeDisruptionPolicyFile{Path: "/etc/systemd/system/chronyd.service.d", Actions: restart})
	return l
}

// chronyConfig is a rendered config with /etc/chrony.conf and a drop-in
// of chronyd.service (a file under /etc/systemd/system, which adds a
// daemon-reload), both with content.
func (r *rig) chronyConfig(content string) string {
	r.t.Helper()
	ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[`+
		`{"path":"/etc/chrony.conf","mode":420,"overwrite":true,"contents":{"source":"data:,%[1]s%%0A"}},`+
		`{"path":"/etc/systemd/system/chronyd.service.d/10-strata.conf","mode":420,"overwrite":true,"contents":{"source":"data:,%%23%[1]s%%0A"}}]}}`, content)
	name := fmt.Sprintf("rendered-%s-chronyd-%s", r.name, content)
	mc := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}}}
	if err := env.Client.Create(r.ctx, mc); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mc) })
	return name
}

func (l *liveRig) chronyImage(tag, content string) string {
	return l.image(tag, nil, map[string]string{
		"etc/chrony.conf": content + "\n",
		"etc/systemd/system/chronyd.service.d/10-strata.conf": "#" + content + "\n",
	})
}

func (l *liveRig) etc(p string) string {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(l.dir, p))
	if err != nil {
		l.t.Fatal(err)
	}
	return string(b)
}

// TestLiveApplyOnTheSimulator (issue 21 point 3): a change the policy
// applies live takes no drain and no reboot; the changed files are live
// as the staged image has them, the actions ran in order, the node
// reports the config current, the staged image current and the booted
// one in use; a later reboot boots the staged image with the same files.
func TestLiveApplyOnTheSimulator(t *testing.T) {
	l := newLiveRig(t)
	bootID, err := l.sim.BootID()
	if err != nil {
		t.Fatal(err)
	}
	two, configB := l.chronyImage("two", "b"), l.chronyConfig("b")
	l.desire(two, configB)
	before := l.sim.counts().statuses
	l.sync()
	// One sync takes the update through: bootc's status read at its
	// start, and once after the switch for the decision, the live apply
	// and the unlock together.
	if n := l.sim.counts().statuses - before; n != 2 || l.ann(v1alpha1.CurrentConfigAnnotation) != configB {
		t.Errorf("one sync read bootc's status %d times and reports config %q; want 2 reads and %q applied",
			n, l.ann(v1alpha1.CurrentConfigAnnotation), configB)
	}
	l.converge()

	if got := l.sim.counts(); got.reboots != 0 || got.switches != 1 {
		t.Errorf("bootc and reboot calls %+v, want one switch and no reboot", got)
	}
	if d := l.drains(); len(d) != 0 {
		t.Errorf("drain requests %q, want none", d)
	}
	if id, _ := l.sim.BootID(); id != bootID {
		t.Errorf("boot id %s, want %s kept", id, bootID)
	}
	if got := l.etc("etc/chrony.conf"); got != "b\n" {
		t.Errorf("live /etc/chrony.conf %q, want the staged image's %q", got, "b\n")
	}
	if got := l.etc("etc/systemd/system/chronyd.service.d/10-strata.conf"); got != "#b\n" {
		t.Errorf("live drop-in %q, want %q", got, "#b\n")
	}
	if want := []string{"daemon-reload", "restart chronyd.service"}; !slices.Equal(l.calls, want) {
		t.Errorf("systemctl calls %q, want %q", l.calls, want)
	}
	l.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentConfigAnnotation: configB,
		v1alpha1.CurrentImageAnnotation:  two,
		v1alpha1.BootedImageAnnotation:   l.one,
	})
	if got := l.ann(v1alpha1.DisruptionAnnotation); !strings.HasPrefix(got, "Live: ") {
		t.Errorf("disruption annotation %q, want a Live decision", got)
	}
	if staged, _ := l.sim.entries(); staged != bootc.DigestOf(two) {
		t.Errorf("staged %q, want the desired image staged for the next boot", staged)
	}
	// Nothing more to do: the next sync is in sync.
	l.sync()
	if got := l.sim.counts(); got.switches != 1 {
		t.Errorf("switches %d after another sync, want 1", got.switches)
	}

	// A later reboot, whatever asks for it, boots the staged image.
	l.reboot()
	l.sync()
	if _, booted := l.sim.entries(); booted != bootc.DigestOf(two) {
		t.Errorf("booted %s after the reboot, want %s", booted, bootc.DigestOf(two))
	}
	l.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
		v1alpha1.CurrentImageAnnotation: two,
		v1alpha1.BootedImageAnnotation:  "",
	})
	if got := l.etc("etc/chrony.conf"); got != "b\n" {
		t.Errorf("/etc/chrony.conf %q after the reboot, want %q", got, "b\n")
	}
}

// TestLiveApplyFallsBack (issue 21 point 3): a failed action turns the
// live decision into a full reboot, with the reason, and the update then
// drains and reboots as any other.
func TestLiveApplyFallsBack(t *testing.T) {
	l := newLiveRig(t)
	l.fail = "restart chronyd.service"
	two, configB := l.chronyImage("two", "b"), l.chronyConfig("b")
	l.desire(two, configB)
	l.converge()
	if got := l.sim.counts(); got.reboots != 1 {
		t.Errorf("reboots %d, want the fallback's one", got.reboots)
	}
	if d := l.drains(); len(d) != 1 {
		t.Errorf("drain requests %q, want one", d)
	}
	got := l.ann(v1alpha1.DisruptionAnnotation)
	if !strings.HasPrefix(got, "Reboot: ") || !strings.Contains(got, "an action failed") || !strings.Contains(got, "Job for chronyd.service failed") {
		t.Errorf("disruption annotation %q, want the fallback to a reboot with the failed action", got)
	}
	l.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentConfigAnnotation: configB,
		v1alpha1.CurrentImageAnnotation:  two,
	})
}

// TestSoftRebootOnTheSimulator (issue 21 point 4): a change no policy
// names, on a soft-reboot capable deployment, drains and soft-reboots:
// the boot id is kept, systemd's soft reboot count goes up by one, the
// desired image boots, and the health gate runs as after a reboot.
func TestSoftRebootOnTheSimulator(t *testing.T) {
	l := newLayeredSim(t)
	l.newDaemonWithImages(l.reg)
	bootID, err := l.sim.BootID()
	if err != nil {
		t.Fatal(err)
	}
	before, err := l.sim.sim.SoftReboots()
	if err != nil {
		t.Fatal(err)
	}
	two, configB := l.image("two", nil, map[string]string{"etc/chrony.conf": "b\n"}), l.etcConfig("b", nil)
	l.desire(two, configB)
	l.sync()
	l.applyDrain()
	if !l.sync().Rebooting {
		t.Fatal("no soft reboot asked for")
	}
	if u := l.record().Update; u == nil || !u.Soft || u.SoftReboots != before {
		t.Fatalf("state file update %+v, want a soft reboot recorded from count %d", u, before)
	}
	// Not Ready at first (a soft reboot restarts the kubelet too): the
	// health gate must hold the update.
	l.setReady(false)
	l.reboot()
	l.sync()
	if u := l.record().Update; u == nil || u.Phase != PhaseVerifying {
		t.Fatalf("state file update %+v after the soft reboot, want it verifying", u)
	}
	if got := l.ann(v1alpha1.StateAnnotation); got == v1alpha1.NodeStateDone {
		t.Fatal("reported Done while the health check fails")
	}
	l.setReady(true)
	l.converge()

	if id, _ := l.sim.BootID(); id != bootID {
		t.Errorf("boot id %s after the soft reboot, want %s kept", id, bootID)
	}
	if after, _ := l.sim.sim.SoftReboots(); after != before+1 {
		t.Errorf("soft reboot count %d, want %d", after, before+1)
	}
	if got := l.sim.counts(); got.reboots != 0 {
		t.Errorf("full reboots %d, want none", got.reboots)
	}
	if _, booted := l.sim.entries(); booted != bootc.DigestOf(two) {
		t.Errorf("booted %s, want %s", booted, bootc.DigestOf(two))
	}
	if d := l.drains(); len(d) != 1 {
		t.Errorf("drain requests %q, want one", d)
	}
	l.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentImageAnnotation:  two,
		v1alpha1.CurrentConfigAnnotation: configB,
	})
	if got := l.ann(v1alpha1.DisruptionAnnotation); !strings.HasPrefix(got, "SoftReboot: ") {
		t.Errorf("disruption annotation %q, want a soft reboot", got)
	}
}

// TestKernelArgumentsRebootFullyOnTheSimulator (issue 21 point 4): bootc
// reports the deployment soft-reboot capable (it misses kargs changes,
// bootc issue 1350), but a kernel argument change reboots fully.
func TestKernelArgumentsRebootFullyOnTheSimulator(t *testing.T) {
	l := newLayeredSim(t)
	l.newDaemonWithImages(l.reg)
	bootID, err := l.sim.BootID()
	if err != nil {
		t.Fatal(err)
	}
	two, configB := l.image("two", nil, map[string]string{"etc/chrony.conf": "b\n"}), l.etcConfig("b", []string{"quiet"})
	l.desire(two, configB)
	l.sync()
	if !l.stagedCapable() {
		t.Fatal("the simulator does not report the staged deployment soft-reboot capable")
	}
	l.converge()
	if got := l.sim.counts(); got.reboots != 1 || got.softReboots != 0 {
		t.Errorf("reboot calls %+v, want one full reboot and no soft one", got)
	}
	if id, _ := l.sim.BootID(); id == bootID {
		t.Error("the boot id did not change: no full reboot")
	}
	l.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
		v1alpha1.CurrentImageAnnotation: two,
	})
}

// TestBootedWithoutTheDrainOnTheSimulator (issue 21 point 5, bootc
// without locked staging): a clean reboot nobody asked Strata for,
// between the stage and the drain, boots the staged image; the daemon
// recognises it and holds the update to the health gate before Done.
func TestBootedWithoutTheDrainOnTheSimulator(t *testing.T) {
	r, _, two := newSimRig(t)
	config := r.varConfig("one")
	r.desire(two, config)
	r.sync() // staged, decided, drain asked
	if r.record().Disruption == nil {
		t.Fatal("no decision recorded after the stage")
	}
	// Another reboot manager reboots the node cleanly: bootc finalizes
	// the staged deployment.
	r.setReady(false)
	r.reboot()
	if _, booted := r.sim.entries(); booted != bootc.DigestOf(two) {
		t.Fatalf("booted %s after a clean reboot, want the staged %s", booted, bootc.DigestOf(two))
	}
	r.sync()
	if u := r.record().Update; u == nil || u.Phase != PhaseVerifying || u.Image != two {
		t.Fatalf("state file update %+v, want the update verifying", u)
	}
	if got := r.ann(v1alpha1.StateAnnotation); got == v1alpha1.NodeStateDone {
		t.Fatal("reported Done before the health gate passed")
	}
	r.setReady(true)
	r.converge()
	if got := r.sim.counts(); got.reboots != 0 || got.switches != 1 {
		t.Errorf("bootc and reboot calls %+v, want one switch and no reboot of the daemon's", got)
	}
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentImageAnnotation:  two,
		v1alpha1.CurrentConfigAnnotation: config,
	})
	if got := r.marker(); got != "one" {
		t.Errorf("marker %q: the config's node items were not written", got)
	}
}

// TestLockedStagingOnTheSimulator (issue 21 point 5): on both bootc
// releases the staged image is locked (switch --download-only, or on
// 1.16 a switch then upgrade --download-only), so a clean reboot nobody
// asked Strata for boots the current image; the update then proceeds
// with its drain and reboot.
func TestLockedStagingOnTheSimulator(t *testing.T) {
	for _, v := range []bootcsim.Version{bootcsim.Version116, bootcsim.VersionMain} {
		t.Run(string(v), func(t *testing.T) {
			r, one, two := newSimRig(t)
			if err := r.sim.sim.SetBootcVersion(v); err != nil {
				t.Fatal(err)
			}
			r.lock = r.sim
			r.restart()
			config := r.varConfig("one")
			r.desire(two, config)
			r.sync()
			st, err := r.sim.Status(r.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status.Staged == nil || st.Status.Staged.Digest() != bootc.DigestOf(two) || !st.Status.Staged.DownloadOnly {
				t.Fatalf("staged %+v, want %s staged locked", st.Status.Staged, two)
			}
			// Another reboot manager reboots the node cleanly.
			r.reboot()
			if _, booted := r.sim.entries(); booted != bootc.DigestOf(one) {
				t.Fatalf("booted %s after an unplanned reboot, want the current %s", booted, bootc.DigestOf(one))
			}
			r.converge()
			if got := r.sim.counts(); got.reboots != 1 {
				t.Errorf("reboot calls %+v, want the daemon's one", got)
			}
			if d := r.drains(); len(d) != 1 {
				t.Errorf("drain requests %q, want one", d)
			}
			if _, booted := r.sim.entries(); booted != bootc.DigestOf(two) {
				t.Errorf("booted %s, want %s", booted, bootc.DigestOf(two))
			}
			r.expectAnnotations(map[string]string{
				v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
				v1alpha1.CurrentImageAnnotation: two,
			})
		})
	}
}

// TestUpdateOnTopOfALiveApply (issue 21 point 3): updates that follow a
// live apply, before any reboot booted its staged image. Another live
// change replaces the staged image and writes its files, the booted image
// still the one to keep; then a kernel argument change drains and reboots
// into its own image, whose /etc wins over both live applies, and no
// file of theirs is left as a local modification.
func TestUpdateOnTopOfALiveApply(t *testing.T) {
	l := newLiveRig(t)
	bootID, err := l.sim.BootID()
	if err != nil {
		t.Fatal(err)
	}
	two, configB := l.chronyImage("two", "b"), l.chronyConfig("b")
	l.desire(two, configB)
	l.converge()
	three, configC := l.chronyImage("three", "c"), l.chronyConfig("c")
	l.desire(three, configC)
	l.converge()

	if got := l.sim.counts(); got.reboots != 0 || got.switches != 2 {
		t.Errorf("bootc and reboot calls %+v, want two switches and no reboot", got)
	}
	if d := l.drains(); len(d) != 0 {
		t.Errorf("drain requests %q, want none", d)
	}
	if id, _ := l.sim.BootID(); id != bootID {
		t.Errorf("boot id %s, want %s kept", id, bootID)
	}
	if got := l.ann(v1alpha1.DisruptionAnnotation); !strings.HasPrefix(got, "Live: ") {
		t.Errorf("disruption annotation %q, want the second change live too", got)
	}
	if staged, booted := l.sim.entries(); staged != bootc.DigestOf(three) || booted != bootc.DigestOf(l.one) {
		t.Errorf("staged %s, booted %s; want %s staged over %s", staged, booted, bootc.DigestOf(three), bootc.DigestOf(l.one))
	}
	if got := l.etc("etc/chrony.conf"); got != "c\n" {
		t.Errorf("live /etc/chrony.conf %q, want %q", got, "c\n")
	}
	if want := []string{"daemon-reload", "restart chronyd.service", "daemon-reload", "restart chronyd.service"}; !slices.Equal(l.calls, want) {
		t.Errorf("systemctl calls %q, want %q", l.calls, want)
	}
	l.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentConfigAnnotation: configC,
		v1alpha1.CurrentImageAnnotation:  three,
		v1alpha1.BootedImageAnnotation:   l.one,
	})

	// A kernel argument: a full reboot, into its own image.
	four, configD := l.image("four", nil, map[string]string{"etc/chrony.conf": "d\n"}), l.etcConfig("d", []string{"quiet"})
	l.desire(four, configD)
	l.converge()
	if got := l.sim.counts(); got.reboots != 1 {
		t.Errorf("reboots %d, want one", got.reboots)
	}
	if d := l.drains(); len(d) != 1 {
		t.Errorf("drain requests %q, want one", d)
	}
	if got := l.ann(v1alpha1.DisruptionAnnotation); !strings.HasPrefix(got, "Reboot: ") || !strings.Contains(got, "kernel arguments") {
		t.Errorf("disruption annotation %q, want a full reboot for the kernel arguments", got)
	}
	if staged, booted := l.sim.entries(); staged != "" || booted != bootc.DigestOf(four) {
		t.Errorf("staged %q, booted %s; want %s booted", staged, booted, bootc.DigestOf(four))
	}
	if got := l.etc("etc/chrony.conf"); got != "d\n" {
		t.Errorf("/etc/chrony.conf %q after the reboot, want the image's %q", got, "d\n")
	}
	if _, err := os.Lstat(filepath.Join(l.dir, "etc/systemd/system/chronyd.service.d/10-strata.conf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the live-applied drop-in, which image four does not have, is still there: %v", err)
	}
	l.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentConfigAnnotation: configD,
		v1alpha1.CurrentImageAnnotation:  four,
		v1alpha1.BootedImageAnnotation:   "",
	})
}
