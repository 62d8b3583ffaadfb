package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/disruption"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/rollout/hostfs"
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
	if err := sim.Init(r.ctx, one); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	r.root, r.sim = root, &simHost{t: t, sim: sim}
	r.d = r.newDaemon()
	configA := l.etcConfig("a", nil)
	r.desire(one, configA)
	r.converge()
	if got := r.record().CurrentConfig; got != configA {
		t.Fatalf("current config %q, want %q", got, configA)
	}
	return l
}

func (r *rig) newDaemonWithImages(reg *testregistry.Registry) {
	r.d.Images = &RegistryImages{Registry: registry.Client{Insecure: []string{reg.Host}}}
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
	mc := &v1alpha1.MachineConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.MachineConfigurationName},
		Spec: v1alpha1.MachineConfigurationSpec{NodeDisruptionPolicy: v1alpha1.NodeDisruptionPolicyConfig{
			Files: []v1alpha1.NodeDisruptionPolicyFile{{Path: "/etc/chrony.conf", Actions: actions}},
		}},
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
	t.Run("a policy names the file: live, with its action", func(t *testing.T) {
		l := newLayeredSim(t)
		l.newDaemonWithImages(l.reg)
		clusterPolicy(t, l.rig, v1alpha1.NodeDisruptionPolicyAction{Type: v1alpha1.RestartAction,
			Restart: &v1alpha1.NodeDisruptionPolicyService{ServiceName: "chronyd.service"}})
		two := l.image("two", nil, map[string]string{"etc/chrony.conf": "b\n"})
		d := l.decided(two, l.etcConfig("b", nil))
		want := []DisruptionAction{{Type: v1alpha1.RestartAction, Service: "chronyd.service"}}
		if d.Kind != disruption.Live || d.Drain || !equalJSON(d.Actions, want) {
			t.Errorf("decision %+v, want Live without a drain, actions %+v", d, want)
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

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
