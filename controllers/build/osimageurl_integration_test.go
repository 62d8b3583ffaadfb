package build

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// setRenderedWithOSImageURL points the pool at a rendered config merged,
// as the render controller records it, from a MachineConfig without an
// osImageURL and one (named source) with url.
func (f *fixture) setRenderedWithOSImageURL(source, url string) {
	f.t.Helper()
	plain := "00-" + f.name + "-files"
	for name, spec := range map[string]v1alpha1.MachineConfigSpec{plain: {}, source: {OSImageURL: url}} {
		f.create(&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	}
	rendered := "rendered-" + f.name + "-os"
	f.create(&v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: rendered, Annotations: map[string]string{
			v1alpha1.GeneratedByControllerAnnotation: "test",
			v1alpha1.SourceMachineConfigsAnnotation:  plain + "," + source,
		}},
		Spec: v1alpha1.MachineConfigSpec{OSImageURL: url, Config: runtime.RawExtension{Raw: []byte(
			`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/version","mode":420,"contents":{"source":"data:,os"}}]}}`)}},
	})
	f.pointPool(rendered)
}

func poolCondition(t *testing.T, pool, typ string) *metav1.Condition {
	t.Helper()
	p := &v1alpha1.MachineConfigPool{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: pool}, p); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(p.Status.Conditions, typ)
}

// TestBaseOverridesOSImageURL is issue 26.1: with a base image on the
// MachineOSConfig and an osImageURL in a MachineConfig, the build goes
// on from the MachineOSConfig's base, and the MachineOSConfig and the
// pool say, in a reason of their non-degraded conditions, which
// MachineConfig's osImageURL is not used.
func TestBaseOverridesOSImageURL(t *testing.T) {
	f := newFixture(t, "ovr")
	startController(t, f.reg, 0)
	osImage := f.push("strata/os:1")
	f.setRenderedWithOSImageURL("99-ovr-os", osImage)
	f.mosc()

	b := waitBuild(t, f.name)
	if !strings.HasPrefix(b.Status.BaseImagePullSpec, f.reg.Host+"/strata/base@sha256:") {
		t.Errorf("built on %q, want the MachineOSConfig's base %s", b.Status.BaseImagePullSpec, f.base)
	}
	wantMsg := fmt.Sprintf("spec.baseImagePullSpec %q overrides spec.osImageURL %q of MachineConfig 99-ovr-os", f.base, osImage)
	eventually(t, "the MachineOSConfig and the pool name the MachineConfig", func() error {
		d := meta.FindStatusCondition(getMOSC(t, f.name).Status.Conditions, v1alpha1.ConfigDegraded)
		if d == nil || d.Status != metav1.ConditionFalse || d.Reason != v1alpha1.ReasonBaseOverridesOSImageURL || !strings.Contains(d.Message, wantMsg) {
			return fmt.Errorf("MachineOSConfig Degraded %+v", d)
		}
		c := poolCondition(t, f.name, v1alpha1.PoolImageBuildDegraded)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonBaseOverridesOSImageURL || !strings.Contains(c.Message, wantMsg) {
			return fmt.Errorf("pool ImageBuildDegraded %+v", c)
		}
		return nil
	})
}

// TestOSImageURLIsTheBase: without a base on the MachineOSConfig the
// rendered osImageURL is the base, as in OpenShift, and nothing is said
// to be overridden; a base that cannot be pulled is named as the source
// MachineConfig's spec.osImageURL, not the rendered config's.
func TestOSImageURLIsTheBase(t *testing.T) {
	f := newFixture(t, "osurl")
	startController(t, f.reg, 0)
	f.setRenderedWithOSImageURL("99-osurl-os", f.base)
	f.mosc(func(m *v1alpha1.MachineOSConfig) { m.Spec.BaseImagePullSpec = "" })

	b := waitBuild(t, f.name)
	if !strings.HasPrefix(b.Status.BaseImagePullSpec, f.reg.Host+"/strata/base@sha256:") {
		t.Errorf("built on %q, want the osImageURL %s", b.Status.BaseImagePullSpec, f.base)
	}
	d := meta.FindStatusCondition(getMOSC(t, f.name).Status.Conditions, v1alpha1.ConfigDegraded)
	if d == nil || d.Status != metav1.ConditionFalse || d.Reason != v1alpha1.ReasonAsExpected {
		t.Errorf("MachineOSConfig Degraded %+v, want False AsExpected", d)
	}

	g := newFixture(t, "osurl-bad")
	g.setRenderedWithOSImageURL("99-osurl-bad-os", "127.0.0.1:1/strata/os:1")
	g.mosc(func(m *v1alpha1.MachineOSConfig) { m.Spec.BaseImagePullSpec = "" })
	eventually(t, "Degraded names the MachineConfig's spec.osImageURL", func() error {
		d := meta.FindStatusCondition(getMOSC(t, g.name).Status.Conditions, v1alpha1.ConfigDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || d.Reason != v1alpha1.ReasonBaseUnreachable ||
			!strings.Contains(d.Message, "spec.osImageURL of MachineConfig 99-osurl-bad-os") {
			return fmt.Errorf("Degraded %+v", d)
		}
		return nil
	})
}
