package render

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/degraded"
	"github.com/strata-dev/strata/test/testenv"
)

// These tests run the reconciler in a real manager against a real
// apiserver and assert on the objects it leaves, never on the calls it
// made. Each test uses its own pools and MachineConfig labels.

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error { env = e; return nil })
}

const timeout = 30 * time.Second

// startController runs the render controller until the test ends (or
// stop is called, to simulate a crash).
func startController(t *testing.T, history int) (stop func()) {
	t.Helper()
	return env.StartManager(t, ctrl.Options{}, func(mgr ctrl.Manager) error {
		return setup(mgr, history)
	})
}

// setup registers the render controller and its garbage collector, as
// strata-controller does, and the owner of the pool's Degraded summary.
func setup(mgr ctrl.Manager, history int) error {
	r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-render")}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&degraded.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&GCReconciler{Client: mgr.GetClient(), History: history}).SetupWithManager(mgr)
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, what, check)
}

func newPool(t *testing.T, name string, selector map[string]string) *v1alpha1.MachineConfigPool {
	t.Helper()
	p := &v1alpha1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MachineConfigPoolSpec{
			MachineConfigSelector: &metav1.LabelSelector{MatchLabels: selector},
		},
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileConfig(files map[string]string) runtime.RawExtension {
	var entries []string
	for _, path := range slices.Sorted(mapsKeys(files)) {
		entries = append(entries, fmt.Sprintf(`{"path":%q,"mode":420,"contents":{"source":"data:,%s"}}`, path, files[path]))
	}
	return runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[` + strings.Join(entries, ",") + `]}}`)}
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func newMC(t *testing.T, name string, labels map[string]string, files map[string]string, kargs ...string) *v1alpha1.MachineConfig {
	t.Helper()
	mc := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1alpha1.MachineConfigSpec{Config: fileConfig(files), KernelArguments: kargs},
	}
	if err := env.Client.Create(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
	return mc
}

func getPool(t *testing.T, name string) *v1alpha1.MachineConfigPool {
	t.Helper()
	p := &v1alpha1.MachineConfigPool{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitRendered waits until the pool's configuration lists exactly sources
// and returns the rendered config.
func waitRendered(t *testing.T, pool string, sources ...string) *v1alpha1.MachineConfig {
	t.Helper()
	var rendered *v1alpha1.MachineConfig
	eventually(t, "pool "+pool+" renders "+strings.Join(sources, ","), func() error {
		p := getPool(t, pool)
		var got []string
		for _, s := range p.Status.Configuration.Source {
			got = append(got, s.Name)
		}
		if !slices.Equal(got, sources) {
			return fmt.Errorf("sources %v", got)
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PoolRenderDegraded); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("RenderDegraded %v", c)
		}
		mc := &v1alpha1.MachineConfig{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: p.Status.Configuration.Name}, mc); err != nil {
			return err
		}
		rendered = mc
		return nil
	})
	return rendered
}

func renderedOf(t *testing.T, pool string) []string {
	t.Helper()
	var list v1alpha1.MachineConfigList
	if err := env.Client.List(context.Background(), &list, client.MatchingLabels{v1alpha1.PoolLabel: pool}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mc := range list.Items {
		names = append(names, mc.Name)
	}
	slices.Sort(names)
	return names
}

func deleteMC(t *testing.T, name string) {
	t.Helper()
	mc := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Delete(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
}

func TestOverlappingPools(t *testing.T) {
	startController(t, 0)
	newPool(t, "ov-a", map[string]string{"ov-a": "true"})
	newPool(t, "ov-b", map[string]string{"ov-b": "true"})
	newMC(t, "ov-00-common", map[string]string{"ov-a": "true", "ov-b": "true"}, map[string]string{"/etc/common": "c"})
	newMC(t, "ov-10-a", map[string]string{"ov-a": "true"}, map[string]string{"/etc/a": "a"})
	newMC(t, "ov-10-b", map[string]string{"ov-b": "true"}, map[string]string{"/etc/b": "b"})

	a := waitRendered(t, "ov-a", "ov-00-common", "ov-10-a")
	b := waitRendered(t, "ov-b", "ov-00-common", "ov-10-b")
	if a.Name == b.Name {
		t.Fatalf("two pools with different content share %s", a.Name)
	}
	for pool, mc := range map[string]*v1alpha1.MachineConfig{"ov-a": a, "ov-b": b} {
		if !strings.HasPrefix(mc.Name, "rendered-"+pool+"-") {
			t.Errorf("rendered name %s lacks the pool", mc.Name)
		}
		owner := metav1.GetControllerOf(mc)
		if owner == nil || owner.Kind != "MachineConfigPool" || owner.Name != pool {
			t.Errorf("%s owned by %v, want pool %s", mc.Name, owner, pool)
		}
		if mc.Annotations[v1alpha1.GeneratedByControllerAnnotation] == "" {
			t.Errorf("%s lacks the generated-by-controller annotation", mc.Name)
		}
	}
	if got := a.Annotations[v1alpha1.SourceMachineConfigsAnnotation]; got != "ov-00-common,ov-10-a" {
		t.Errorf("sources annotation %q", got)
	}
	if !strings.Contains(string(a.Spec.Config.Raw), "/etc/a") || strings.Contains(string(a.Spec.Config.Raw), "/etc/b") {
		t.Errorf("pool a's rendered config has the wrong files: %s", a.Spec.Config.Raw)
	}
}

// TestLabelMoveReRendersBothPools: a MachineConfig relabelled from one
// pool's selection to another's leaves the first (its old labels reach
// that pool) and joins the second.
func TestLabelMoveReRendersBothPools(t *testing.T) {
	startController(t, 0)
	newPool(t, "mv-a", map[string]string{"mv": "a"})
	newPool(t, "mv-b", map[string]string{"mv": "b"})
	newMC(t, "mv-00-a", map[string]string{"mv": "a"}, map[string]string{"/etc/a": "a"})
	newMC(t, "mv-00-b", map[string]string{"mv": "b"}, map[string]string{"/etc/b": "b"})
	mover := newMC(t, "mv-10-mover", map[string]string{"mv": "a"}, map[string]string{"/etc/mover": "1"})
	waitRendered(t, "mv-a", "mv-00-a", "mv-10-mover")
	waitRendered(t, "mv-b", "mv-00-b")

	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(mover), mover); err != nil {
		t.Fatal(err)
	}
	mover.Labels = map[string]string{"mv": "b"}
	if err := env.Client.Update(context.Background(), mover); err != nil {
		t.Fatal(err)
	}
	waitRendered(t, "mv-a", "mv-00-a")
	waitRendered(t, "mv-b", "mv-00-b", "mv-10-mover")
}

func TestAddChangeDeleteMachineConfig(t *testing.T) {
	startController(t, 0)
	newPool(t, "acd", map[string]string{"acd": "true"})
	labels := map[string]string{"acd": "true"}
	newMC(t, "acd-00-base", labels, map[string]string{"/etc/base": "1"})
	first := waitRendered(t, "acd", "acd-00-base")

	newMC(t, "acd-10-extra", labels, map[string]string{"/etc/extra": "1"}, "nosmt")
	second := waitRendered(t, "acd", "acd-00-base", "acd-10-extra")
	if second.Name == first.Name {
		t.Fatal("adding a MachineConfig did not change the rendered config")
	}
	if !slices.Equal(second.Spec.KernelArguments, []string{"nosmt"}) {
		t.Errorf("kernel arguments %v", second.Spec.KernelArguments)
	}

	extra := &v1alpha1.MachineConfig{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "acd-10-extra"}, extra); err != nil {
		t.Fatal(err)
	}
	extra.Spec.Config = fileConfig(map[string]string{"/etc/extra": "2"})
	if err := env.Client.Update(context.Background(), extra); err != nil {
		t.Fatal(err)
	}
	var third *v1alpha1.MachineConfig
	eventually(t, "rendered config follows the change", func() error {
		third = waitRendered(t, "acd", "acd-00-base", "acd-10-extra")
		if third.Name == second.Name {
			return errors.New("still the old rendered config")
		}
		return nil
	})
	if !strings.Contains(string(third.Spec.Config.Raw), "data:,2") {
		t.Errorf("rendered config lacks the change: %s", third.Spec.Config.Raw)
	}

	deleteMC(t, "acd-10-extra")
	back := waitRendered(t, "acd", "acd-00-base")
	if back.Name != first.Name {
		t.Errorf("after the delete the pool renders %s, want the first config %s again", back.Name, first.Name)
	}
}

func TestRenameKeepsRenderedName(t *testing.T) {
	startController(t, 0)
	newPool(t, "ren", map[string]string{"ren": "true"})
	labels := map[string]string{"ren": "true"}
	newMC(t, "ren-old-name", labels, map[string]string{"/etc/motd": "hello"})
	before := waitRendered(t, "ren", "ren-old-name")

	newMC(t, "ren-new-name", labels, map[string]string{"/etc/motd": "hello"})
	deleteMC(t, "ren-old-name")
	after := waitRendered(t, "ren", "ren-new-name")
	if after.Name != before.Name {
		t.Errorf("same content under a new name rendered %s, want %s", after.Name, before.Name)
	}
	if got := after.Annotations[v1alpha1.SourceMachineConfigsAnnotation]; got != "ren-new-name" {
		t.Errorf("sources annotation %q, want the new name", got)
	}
}

func TestInvalidThenFixed(t *testing.T) {
	startController(t, 0)
	newPool(t, "inv", map[string]string{"inv": "true"})
	labels := map[string]string{"inv": "true"}
	newMC(t, "inv-00-good", labels, map[string]string{"/etc/good": "1"})
	good := waitRendered(t, "inv", "inv-00-good")

	bad := newMC(t, "inv-50-bad", labels, map[string]string{"/etc/ok": "1", "/proc/sys/kernel/panic": "1"})
	eventually(t, "RenderDegraded names the MachineConfig and field", func() error {
		c := meta.FindStatusCondition(getPool(t, "inv").Status.Conditions, v1alpha1.PoolRenderDegraded)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("RenderDegraded %v", c)
		}
		for _, want := range []string{"MachineConfig inv-50-bad", "spec.config.storage.files[1].path", "/proc/sys/kernel/panic"} {
			if !strings.Contains(c.Message, want) {
				return fmt.Errorf("message %q lacks %q", c.Message, want)
			}
		}
		return nil
	})
	p := getPool(t, "inv")
	if p.Status.Configuration.Name != good.Name {
		t.Errorf("pool moved to %s on bad input, want it to keep %s", p.Status.Configuration.Name, good.Name)
	}
	// Degraded is the degraded controller's summary: it follows
	// RenderDegraded in its own write.
	waitDegraded(t, "inv", metav1.ConditionTrue, "while a MachineConfig is invalid")
	if got := renderedOf(t, "inv"); !slices.Equal(got, []string{good.Name}) {
		t.Errorf("rendered configs %v: a bad input must make none", got)
	}

	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(bad), bad); err != nil {
		t.Fatal(err)
	}
	bad.Spec.Config = fileConfig(map[string]string{"/etc/ok": "1", "/etc/sysctl.d/panic.conf": "kernel.panic=1"})
	if err := env.Client.Update(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	fixed := waitRendered(t, "inv", "inv-00-good", "inv-50-bad")
	if fixed.Name == good.Name {
		t.Error("the fix did not render a new config")
	}
	waitDegraded(t, "inv", metav1.ConditionFalse, "after the fix")
}

// waitDegraded waits for the pool's Degraded condition to have status.
func waitDegraded(t *testing.T, pool string, status metav1.ConditionStatus, when string) {
	t.Helper()
	eventually(t, "Degraded "+string(status)+" "+when, func() error {
		if d := meta.FindStatusCondition(getPool(t, pool).Status.Conditions, v1alpha1.PoolDegraded); d == nil || d.Status != status {
			return fmt.Errorf("Degraded = %v", d)
		}
		return nil
	})
}

func TestSelectorChange(t *testing.T) {
	startController(t, 0)
	pool := newPool(t, "sel", map[string]string{"sel-role": "one"})
	newMC(t, "sel-one", map[string]string{"sel-role": "one"}, map[string]string{"/etc/one": "1"})
	newMC(t, "sel-two", map[string]string{"sel-role": "two"}, map[string]string{"/etc/two": "2"})
	waitRendered(t, "sel", "sel-one")

	pool = getPool(t, pool.Name)
	pool.Spec.MachineConfigSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"sel-role": "two"}}
	if err := env.Client.Update(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	waitRendered(t, "sel", "sel-two")
	eventually(t, "observedGeneration follows the spec", func() error {
		p := getPool(t, "sel")
		if p.Status.ObservedGeneration != p.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", p.Status.ObservedGeneration, p.Generation)
		}
		return nil
	})
}

func TestGarbageCollectionSparesConfigsNamedByNodes(t *testing.T) {
	const history = 2
	startController(t, history)
	newPool(t, "gc", map[string]string{"gc": "true"})
	mc := newMC(t, "gc-config", map[string]string{"gc": "true"}, map[string]string{"/etc/version": "0"})
	first := waitRendered(t, "gc", "gc-config")

	// A node still runs the first config, and another is about to get it.
	for _, n := range []struct{ name, key string }{{"gc-node-current", v1alpha1.CurrentConfigAnnotation}, {"gc-node-desired", v1alpha1.DesiredConfigAnnotation}} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Annotations: map[string]string{n.key: first.Name}}}
		if err := env.Client.Create(context.Background(), node); err != nil {
			t.Fatal(err)
		}
	}

	names := []string{first.Name}
	for v := 1; v <= 5; v++ {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(mc), mc); err != nil {
			t.Fatal(err)
		}
		mc.Spec.Config = fileConfig(map[string]string{"/etc/version": fmt.Sprint(v)})
		if err := env.Client.Update(context.Background(), mc); err != nil {
			t.Fatal(err)
		}
		prev := names[len(names)-1]
		var cur string
		eventually(t, fmt.Sprintf("version %d renders", v), func() error {
			cur = waitRendered(t, "gc", "gc-config").Name
			if cur == prev {
				return errors.New("not yet")
			}
			return nil
		})
		names = append(names, cur)
	}
	// Kept: the current (names[5]), the one the nodes name (names[0]),
	// and the newest `history` of the rest (names[4], names[3]).
	want := []string{names[0], names[3], names[4], names[5]}
	slices.Sort(want)
	eventually(t, "old rendered configs are collected", func() error {
		if got := renderedOf(t, "gc"); !slices.Equal(got, want) {
			return fmt.Errorf("rendered configs %v, want %v", got, want)
		}
		return nil
	})

	// Once no node names it, the first config goes too: one node moves
	// on to the current config, the other is deleted.
	moved := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "gc-node-current"}, moved); err != nil {
		t.Fatal(err)
	}
	moved.Annotations[v1alpha1.CurrentConfigAnnotation] = names[5]
	if err := env.Client.Update(context.Background(), moved); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gc-node-desired"}}); err != nil {
		t.Fatal(err)
	}
	want = []string{names[3], names[4], names[5]}
	slices.Sort(want)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gc-node-current"}})
	})
	eventually(t, "the config no node names is collected", func() error {
		if got := renderedOf(t, "gc"); !slices.Equal(got, want) {
			return fmt.Errorf("rendered configs %v, want %v", got, want)
		}
		return nil
	})
}

func TestRestartConverges(t *testing.T) {
	stop := startController(t, 0)
	newPool(t, "rs", map[string]string{"rs": "true"})
	mc := newMC(t, "rs-config", map[string]string{"rs": "true"}, map[string]string{"/etc/a": "1"})
	first := waitRendered(t, "rs", "rs-config")
	stop() // the controller crashes
	// The pool may have rendered before its MachineConfig was in the
	// cache (no sources); that config stays and is no duplicate.
	existing := renderedOf(t, "rs")

	// While it is down, the input changes, and the state is as if the
	// controller had died after creating the new rendered config but
	// before writing the pool's status.
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(mc), mc); err != nil {
		t.Fatal(err)
	}
	mc.Spec.Config = fileConfig(map[string]string{"/etc/a": "2"})
	if err := env.Client.Update(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
	pool := getPool(t, "rs")
	r := &Reconciler{Client: env.Client}
	name, spec, err := Render("rs", []v1alpha1.MachineConfig{*mc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ensureRendered(context.Background(), pool, name, spec, []v1alpha1.MachineConfig{*mc}); err != nil {
		t.Fatal(err)
	}
	if getPool(t, "rs").Status.Configuration.Name != first.Name {
		t.Fatal("setup: status should still name the first config")
	}

	startController(t, 0)
	var second *v1alpha1.MachineConfig
	eventually(t, "the restarted controller adopts the half-done render", func() error {
		second = waitRendered(t, "rs", "rs-config")
		if second.Name != name {
			return fmt.Errorf("pool renders %s, want %s", second.Name, name)
		}
		return nil
	})
	want := append(slices.Clone(existing), name)
	slices.Sort(want)
	want = slices.Compact(want)
	if got := renderedOf(t, "rs"); !slices.Equal(got, want) {
		t.Errorf("rendered configs %v, want %v: a restart must not duplicate", got, want)
	}

	// Converged means idempotent: another reconcile writes nothing, not
	// even a write the API server finds changes nothing (the stored
	// Ignition config has its keys sorted, the merge does not).
	rv := getPool(t, "rs").ResourceVersion
	renderedRV := second.ResourceVersion
	var writes []string
	count := func(verb string) func(client.Object) {
		return func(o client.Object) { writes = append(writes, verb+" "+o.GetName()) }
	}
	counting, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	direct := &Reconciler{Client: interceptor.NewClient(counting, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			count("create")(o)
			return c.Create(ctx, o, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			count("update")(o)
			return c.Update(ctx, o, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			count("patch")(o)
			return c.Patch(ctx, o, p, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			count("patch " + sub)(o)
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		},
	}), Recorder: noEvents{}}
	if _, err := direct.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "rs"}}); err != nil {
		t.Fatal(err)
	}
	if len(writes) > 0 {
		t.Errorf("an idle reconcile sent writes: %v", writes)
	}
	if got := getPool(t, "rs").ResourceVersion; got != rv {
		t.Errorf("an idle reconcile wrote the pool (resourceVersion %s to %s)", rv, got)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(second), second); err != nil {
		t.Fatal(err)
	}
	if second.ResourceVersion != renderedRV {
		t.Error("an idle reconcile rewrote the rendered config")
	}
}

func TestDeletedPoolReconcilesToNothing(t *testing.T) {
	direct := &Reconciler{Client: env.Client, Recorder: noEvents{}}
	if _, err := direct.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "no-such-pool"}}); err != nil {
		t.Fatalf("reconcile of a missing pool: %v", err)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "no-such-pool"}, &v1alpha1.MachineConfigPool{}); !apierrors.IsNotFound(err) {
		t.Fatalf("want NotFound, got %v", err)
	}
}

type noEvents struct{}

func (noEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}
