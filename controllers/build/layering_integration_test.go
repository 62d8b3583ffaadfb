package build

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node"
)

// startRollout runs the rollout controller beside the build controller,
// as strata-controller does, so that a test sees which image the nodes
// are given.
func startRollout(t *testing.T) {
	t.Helper()
	env.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: node.CacheByObject()}}, func(mgr ctrl.Manager) error {
		return (&node.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-rollout")}).SetupWithManager(mgr)
	})
}

// withNode makes the fixture's pool select one Ready node on its original
// image, as a started daemon reports it.
func (f *fixture) withNode() string {
	f.t.Helper()
	ctx := context.Background()
	label := map[string]string{"layering-test": f.name}
	must := func(err error) {
		f.t.Helper()
		if err != nil {
			f.t.Fatal(err)
		}
	}
	must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.MachineConfigPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: f.name}, p); err != nil {
			return err
		}
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: label}
		return env.Client.Update(ctx, p)
	}))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.name + "-node", Labels: label, Annotations: map[string]string{
		v1alpha1.OriginalImageAnnotation: f.base,
		v1alpha1.CurrentImageAnnotation:  f.base,
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
	}}}
	must(env.Client.Create(ctx, n))
	f.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Test", LastHeartbeatTime: metav1.Now()}}
	must(env.Client.Status().Update(ctx, n))
	return n.Name
}

// named creates a MachineOSConfig of the fixture's pool under another
// name (layering with the default strategy on the base, so no Job runs).
func (f *fixture) named(name string) {
	f.t.Helper()
	f.mosc(configLayer, noContainerfile, func(m *v1alpha1.MachineOSConfig) { m.Name = name })
}

// waitHolderRollsOut waits for the pool's claim to name holder, for the
// node to be given the image of holder's build and for other (if any) to
// report PoolConflict, having built nothing.
func (f *fixture) waitHolderRollsOut(pool, holder, other, nodeName string) {
	f.t.Helper()
	var image string
	eventually(f.t, "MachineOSConfig "+holder+" to hold pool "+pool+" and build", func() error {
		p := &v1alpha1.MachineConfigPool{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: pool}, p); err != nil {
			return err
		}
		if got := p.Annotations[v1alpha1.LayeredByAnnotation]; got != holder {
			return fmt.Errorf("pool %s is layered by %q", pool, got)
		}
		m := getMOSC(f.t, holder)
		if m.Status.MachineOSBuild == nil {
			return fmt.Errorf("%s has no build yet", holder)
		}
		b, err := getBuild(m.Status.MachineOSBuild.Name)
		if err != nil {
			return err
		}
		if b.Spec.MachineConfig.Name != p.Status.Configuration.Name || b.Status.DigestedImagePushSpec == "" {
			return fmt.Errorf("%s has no image of %s yet", holder, p.Status.Configuration.Name)
		}
		image = b.Status.DigestedImagePushSpec
		return nil
	})
	eventually(f.t, "the node of pool "+pool+" to be given "+holder+"'s image, and "+other+" to report PoolConflict", func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: nodeName}, n); err != nil {
			return err
		}
		if got := n.Annotations[v1alpha1.DesiredImageAnnotation]; got != image {
			return fmt.Errorf("node %s desired image %q, want %q (of %s)", nodeName, got, image, holder)
		}
		if other == "" {
			return nil
		}
		c := meta.FindStatusCondition(getMOSC(f.t, other).Status.Conditions, v1alpha1.ConfigDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonPoolConflict {
			return fmt.Errorf("%s condition %s is %+v, want True/%s", other, v1alpha1.ConfigDegraded, c, v1alpha1.ReasonPoolConflict)
		}
		return nil
	})
	if other == "" {
		return
	}
	if builds, err := buildsFor(other, pool); err != nil || len(builds) != 0 {
		f.t.Errorf("MachineOSConfig %s, which does not hold pool %s, built for it: %v (%v)", other, pool, builds, err)
	}
}

// buildsFor names the builds a MachineOSConfig made for a pool.
func buildsFor(mosc, pool string) ([]string, error) {
	var list v1alpha1.MachineOSBuildList
	if err := env.Client.List(context.Background(), &list, client.MatchingLabels{v1alpha1.MachineOSConfigLabel: mosc, v1alpha1.PoolLabel: pool}); err != nil {
		return nil, err
	}
	var names []string
	for _, b := range list.Items {
		names = append(names, b.Name)
	}
	return names, nil
}

// TestOneRuleForWhoLayersAPool runs the build and rollout controllers
// with two MachineOSConfigs for one pool. The one whose claim the build
// controller recorded is the one whose image the nodes get, whatever the
// creation times and names say; the other reports PoolConflict, and
// nothing waits for a build that never comes.
func TestOneRuleForWhoLayersAPool(t *testing.T) {
	// Two in each order: the later one sorts first by name, so an
	// "oldest, by name on ties" rule disagrees with the claim whenever
	// both land in the same second.
	for _, order := range [][2]string{{"zz-first", "aa-second"}, {"aa-first", "zz-second"}} {
		t.Run(order[0], func(t *testing.T) {
			pool := "claim-" + order[0][:2]
			f := newFixture(t, pool)
			nodeName := f.withNode()
			startController(t, f.reg, 0)
			startRollout(t)
			f.named(pool + "-" + order[0])
			eventually(t, "the first MachineOSConfig to claim the pool", func() error {
				p := &v1alpha1.MachineConfigPool{}
				if err := env.Client.Get(context.Background(), client.ObjectKey{Name: pool}, p); err != nil {
					return err
				}
				if p.Annotations[v1alpha1.LayeredByAnnotation] == "" {
					return fmt.Errorf("pool %s not claimed", pool)
				}
				return nil
			})
			f.named(pool + "-" + order[1])
			f.waitHolderRollsOut(pool, pool+"-"+order[0], pool+"-"+order[1], nodeName)
			// A new configuration is built by the holder and reaches the
			// node: nothing waits for the other one.
			f.setRendered("2")
			f.waitHolderRollsOut(pool, pool+"-"+order[0], pool+"-"+order[1], nodeName)
		})
	}

	// Re-pointed: an older MachineOSConfig of another pool is moved onto
	// a pool a younger one already holds. The younger keeps it.
	t.Run("re-pointed", func(t *testing.T) {
		f := newFixture(t, "claim-rp")
		g := f.sharing("claim-rp-other")
		nodeName := f.withNode()
		startController(t, f.reg, 0)
		startRollout(t)
		g.named("claim-rp-older")
		older := getMOSC(t, "claim-rp-older")
		// Creation timestamps have one-second resolution: the younger
		// one is made in a later second, so that the older is older.
		eventually(t, "a second after the older MachineOSConfig was made", func() error {
			if !time.Now().After(older.CreationTimestamp.Add(time.Second)) {
				return fmt.Errorf("still within the second of %s", older.CreationTimestamp)
			}
			return nil
		})
		f.named("claim-rp-younger")
		f.waitHolderRollsOut("claim-rp", "claim-rp-younger", "", nodeName)
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			m := getMOSC(t, "claim-rp-older")
			m.Spec.MachineConfigPool.Name = "claim-rp"
			return env.Client.Update(context.Background(), m)
		}); err != nil {
			t.Fatal(err)
		}
		f.waitHolderRollsOut("claim-rp", "claim-rp-younger", "claim-rp-older", nodeName)
		f.setRendered("2")
		f.waitHolderRollsOut("claim-rp", "claim-rp-younger", "claim-rp-older", nodeName)
	})
}

// sharing makes a second pool of the same registry and credentials, with
// a rendered config, for tests that move a MachineOSConfig between pools.
func (f *fixture) sharing(name string) *fixture {
	f.t.Helper()
	g := &fixture{t: f.t, name: name, reg: f.reg, base: f.base, password: f.password}
	for _, secret := range []string{name + "-push", name + "-pull"} {
		g.create(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: f.reg.DockerConfigJSON(f.password)},
		})
	}
	g.create(&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: name}})
	g.setRendered("1")
	return g
}
