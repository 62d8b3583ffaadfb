package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/degraded"
	"github.com/strata-dev/strata/internal/history"
	"github.com/strata-dev/strata/test/testenv"
)

// These tests run both reconcilers in a real manager against a real
// apiserver. The test plays the node daemons by writing their annotations,
// and asserts on the nodes and pools the controller leaves. Each test
// uses its own pool, node names and labels.

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		// The gate identity (and the rest of the RBAC), as installed.
		return e.Install(context.Background(), "config/rbac")
	})
}

const timeout = 30 * time.Second

// startController runs both reconcilers until the test ends; their log,
// detail included, is kept for the test to read.
func startController(t *testing.T) *testenv.Logs {
	t.Helper()
	return startControllerWithClock(t, nil)
}

// startControllerWithClock is startController with the rollout
// reconciler reading maintenance windows against clk (nil: the real
// clock).
func startControllerWithClock(t *testing.T, clk clock.PassiveClock) *testenv.Logs {
	t.Helper()
	logs := testenv.NewLogs(1)
	env.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: CacheByObject()}, Logger: logs.Logger()}, func(mgr ctrl.Manager) error {
		if err := (&Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-rollout"), Clock: clk}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := (&degraded.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&DrainReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-drain"), Attempt: 2 * time.Second}).SetupWithManager(mgr)
	})
	return logs
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, what, check)
}

func digest(c byte) string { return strings.Repeat(string(c), 64) }

func image(c byte) string { return "registry.example.com/os@sha256:" + digest(c) }

// fixture is one test's pool and nodes.
type fixture struct {
	t     *testing.T
	pool  string
	label map[string]string
	nodes []string
}

// newFixture makes a pool selecting n Ready nodes (each with an original
// image recorded, as a started daemon would) and a rendered config.
func newFixture(t *testing.T, pool string, n int, mutate func(*v1alpha1.MachineConfigPool)) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, pool: pool, label: map[string]string{"test-pool": pool}}
	p := &v1alpha1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec:       v1alpha1.MachineConfigPoolSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: f.label}},
	}
	if mutate != nil {
		mutate(p)
	}
	must(t, env.Client.Create(ctx, p))
	f.rendered("rendered-" + pool + "-1")
	f.setConfig("rendered-" + pool + "-1")
	for i := range n {
		f.nodes = append(f.nodes, f.addNode(fmt.Sprintf("%s-%d", pool, i), f.label, image('0')))
	}
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) rendered(name string) {
	mc := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
			`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/var/lib/x","contents":{"source":"data:,x"}}]}}`)}},
	}
	must(f.t, env.Client.Create(context.Background(), mc))
}

// setConfig plays the render controller: the pool's rendered config. The
// rollout controller writes the same status, so a conflict is retried.
func (f *fixture) setConfig(name string) {
	ctx := context.Background()
	must(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.MachineConfigPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: f.pool}, p); err != nil {
			return err
		}
		p.Status.Configuration.Name = name
		return env.Client.Status().Update(ctx, p)
	}))
}

func (f *fixture) addNode(name string, labels map[string]string, original string) string {
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{
		v1alpha1.OriginalImageAnnotation: original,
		v1alpha1.CurrentImageAnnotation:  original,
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
	}}}
	must(f.t, env.Client.Create(ctx, n))
	f.t.Cleanup(func() { deleteNode(f.t, name) })
	f.setReady(name, true)
	return name
}

// deleteNode removes a test's node, so that no later test's pool sees it.
func deleteNode(t *testing.T, name string) {
	t.Helper()
	err := env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete node %s: %v", name, err)
	}
}

// setReady plays the kubelet. The controllers patch the node meanwhile,
// so a conflict is retried.
func (f *fixture) setReady(name string, ready bool) {
	ctx := context.Background()
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	must(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, Reason: "Test", LastHeartbeatTime: metav1.Now()}}
		return env.Client.Status().Update(ctx, n)
	}))
}

func (f *fixture) node(name string) *corev1.Node {
	n := &corev1.Node{}
	must(f.t, env.Client.Get(context.Background(), client.ObjectKey{Name: name}, n))
	return n
}

func (f *fixture) poolObj() *v1alpha1.MachineConfigPool {
	p := &v1alpha1.MachineConfigPool{}
	must(f.t, env.Client.Get(context.Background(), client.ObjectKey{Name: f.pool}, p))
	return p
}

// annotate plays a daemon (or a person) writing node annotations; "" removes.
func (f *fixture) annotate(name string, kv ...string) {
	ann := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			ann[kv[i]] = nil
		} else {
			ann[kv[i]] = kv[i+1]
		}
	}
	raw, err := jsonPatch(ann)
	must(f.t, err)
	must(f.t, env.Client.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch("application/merge-patch+json", raw)))
}

// finish plays the daemon completing the node's update.
func (f *fixture) finish(name string) {
	n := f.node(name)
	f.annotate(name,
		v1alpha1.CurrentConfigAnnotation, n.Annotations[v1alpha1.DesiredConfigAnnotation],
		v1alpha1.CurrentImageAnnotation, n.Annotations[v1alpha1.DesiredImageAnnotation],
		v1alpha1.StateAnnotation, v1alpha1.NodeStateDone)
}

// taken lists the nodes whose desired pair is (config, image).
func (f *fixture) taken(config, img string) []string {
	var out []string
	for _, name := range f.nodes {
		a := f.node(name).Annotations
		if a[v1alpha1.DesiredConfigAnnotation] == config && a[v1alpha1.DesiredImageAnnotation] == img {
			out = append(out, name)
		}
	}
	return out
}

// layer makes a MachineOSConfig for the pool whose build of config
// succeeded with img, and claims the pool for it as the build controller
// does (layering.Holder reads the claim).
func (f *fixture) layer(config, img string) {
	ctx := context.Background()
	mosc := &v1alpha1.MachineOSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: f.pool},
		Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: f.pool},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
			BaseImagePullSpec:       "registry.example.com/base:latest",
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: "push"},
			RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "pull"},
			RenderedImagePushSpec:   "registry.example.com/os:" + f.pool,
		},
	}
	must(f.t, env.Client.Create(ctx, mosc))
	must(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pool := f.poolObj()
		if pool.Annotations == nil {
			pool.Annotations = map[string]string{}
		}
		pool.Annotations[v1alpha1.LayeredByAnnotation] = mosc.Name
		return env.Client.Update(ctx, pool)
	}))
	f.build(config, img, true)
}

// build plays the build controller: a build of config, succeeded or still
// running, made the MachineOSConfig's current build.
func (f *fixture) build(config, img string, succeeded bool) {
	ctx := context.Background()
	name := f.pool + "-" + config
	owner := &v1alpha1.MachineOSConfig{}
	must(f.t, env.Client.Get(ctx, client.ObjectKey{Name: f.pool}, owner))
	// Labelled, owned and stamped as the build controller makes builds.
	b := &v1alpha1.MachineOSBuild{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:          map[string]string{v1alpha1.PoolLabel: f.pool, v1alpha1.MachineOSConfigLabel: f.pool},
			Annotations:     map[string]string{v1alpha1.CreatedAnnotation: history.Stamp()},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, v1alpha1.GroupVersion.WithKind("MachineOSConfig"))}},
		Spec: v1alpha1.MachineOSBuildSpec{
			MachineConfig:         v1alpha1.LocalObjectReference{Name: config},
			MachineOSConfig:       v1alpha1.LocalObjectReference{Name: f.pool},
			RenderedImagePushSpec: "registry.example.com/os:" + f.pool,
		},
	}
	must(f.t, env.Client.Create(ctx, b))
	if succeeded {
		b.Status.DigestedImagePushSpec = img
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBuildSucceeded, Message: "built"})
		must(f.t, env.Client.Status().Update(ctx, b))
	}
	mosc := &v1alpha1.MachineOSConfig{}
	must(f.t, env.Client.Get(ctx, client.ObjectKey{Name: f.pool}, mosc))
	mosc.Status.MachineOSBuild = &v1alpha1.LocalObjectReference{Name: name}
	if succeeded {
		mosc.Status.CurrentImagePullSpec = img
	}
	must(f.t, env.Client.Status().Update(ctx, mosc))
}

func condition(p *v1alpha1.MachineConfigPool, t string) metav1.Condition {
	if c := meta.FindStatusCondition(p.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func (f *fixture) waitCondition(t, status, reason, contains string) {
	f.t.Helper()
	eventually(f.t, "pool "+f.pool+" condition "+t, func() error {
		c := condition(f.poolObj(), t)
		if string(c.Status) != status || (reason != "" && c.Reason != reason) || !strings.Contains(c.Message, contains) {
			return fmt.Errorf("%s is %s/%s %q; want %s/%s containing %q", t, c.Status, c.Reason, c.Message, status, reason, contains)
		}
		return nil
	})
}

func (f *fixture) waitTaken(config, img string, want int) []string {
	f.t.Helper()
	var got []string
	eventually(f.t, fmt.Sprintf("%d nodes taken for %s", want, img), func() error {
		if got = f.taken(config, img); len(got) != want {
			return fmt.Errorf("taken %v", got)
		}
		return nil
	})
	return got
}

func TestRolloutTakesMaxUnavailableNodesAtATime(t *testing.T) {
	f := newFixture(t, "roll", 4, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
		p.Spec.HealthCheckTimeout = &metav1.Duration{Duration: 3 * time.Minute}
	})
	cfg := "rendered-roll-1"
	f.layer(cfg, image('a'))
	logs := startController(t)

	first := f.waitTaken(cfg, image('a'), 2)
	if !slices.Equal(first, []string{"roll-0", "roll-1"}) {
		t.Errorf("first batch %v, want the first two by name", first)
	}
	n := f.node("roll-0")
	for k, want := range map[string]string{
		v1alpha1.NodePoolAnnotation:           "roll",
		v1alpha1.ImagePullSecretAnnotation:    "pull",
		v1alpha1.HealthCheckTimeoutAnnotation: "3m0s",
	} {
		if got := n.Annotations[k]; got != want {
			t.Errorf("annotation %s = %q, want %q", k, got, want)
		}
	}
	f.waitCondition(v1alpha1.PoolUpdating, "True", v1alpha1.ReasonRollingOut, "0 of 4 nodes updated, 2 unavailable (maxUnavailable 2)")
	// Nothing more is taken while two are in progress.
	f.annotate("roll-0", v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking)
	if got := f.taken(cfg, image('a')); len(got) != 2 {
		t.Fatalf("taken %v while two nodes update", got)
	}
	f.finish("roll-0")
	f.waitTaken(cfg, image('a'), 3)
	f.finish("roll-1")
	f.waitTaken(cfg, image('a'), 4)
	f.finish("roll-2")
	f.finish("roll-3")
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "All 4 nodes run rendered-roll-1 ("+image('a')+")")
	f.waitCondition(v1alpha1.PoolUpdating, "False", "", "")
	// The log tells each node's new desired state and the pool's
	// transitions, with the names an operator searches for.
	for _, node := range []string{"roll-0", "roll-1", "roll-2", "roll-3"} {
		logs.Wait(t, timeout, "Node's desired state changed", map[string]string{"name": "roll", "node": node,
			"desiredConfig": cfg, "desiredImage": image('a'), "previousImage": ""})
	}
	logs.Wait(t, timeout, "Pool condition changed", map[string]string{"name": "roll", "type": v1alpha1.PoolUpdated, "status": "True", "reason": v1alpha1.ReasonAllNodesUpdated})
	logs.Wait(t, timeout, "Planned the rollout", map[string]string{"name": "roll", "level": "1", "targetImage": image('a')})
	p := f.poolObj()
	if p.Status.MachineCount != 4 || p.Status.UpdatedMachineCount != 4 || p.Status.ReadyMachineCount != 4 || p.Status.UnavailableMachineCount != 0 {
		t.Errorf("counts %+v", p.Status)
	}
}

func TestRolloutWaitsForTheBuildOfTheCurrentConfig(t *testing.T) {
	f := newFixture(t, "wait", 2, nil)
	f.layer("rendered-wait-1", image('b'))
	startController(t)
	f.waitTaken("rendered-wait-1", image('b'), 1)
	f.finish("wait-0")
	f.waitTaken("rendered-wait-1", image('b'), 2)
	f.finish("wait-1")
	f.waitCondition(v1alpha1.PoolUpdated, "True", "", "")

	// A new rendered config whose build is still running: nobody moves.
	f.rendered("rendered-wait-2")
	f.setConfig("rendered-wait-2")
	f.build("rendered-wait-2", "", false)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonWaitingForImage, "is not done yet")
	if got := f.taken("rendered-wait-1", image('b')); len(got) != 2 {
		t.Errorf("nodes moved off the old image while the build runs: %v", got)
	}
}

func TestPausedPoolIsLeftAlone(t *testing.T) {
	f := newFixture(t, "paused", 2, func(p *v1alpha1.MachineConfigPool) { p.Spec.Paused = true })
	f.layer("rendered-paused-1", image('c'))
	startController(t)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonPaused, "0 of 2 nodes")
	if got := f.taken("rendered-paused-1", image('c')); len(got) != 0 {
		t.Errorf("a paused pool's nodes were taken: %v", got)
	}
	// The controller writes the pool's status meanwhile: retry a conflict.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := f.poolObj()
		p.Spec.Paused = false
		return env.Client.Update(context.Background(), p)
	}))
	f.waitTaken("rendered-paused-1", image('c'), 1)
}

func TestNodeInTwoPoolsIsReportedAndUntouched(t *testing.T) {
	f := newFixture(t, "twin", 1, nil)
	f.layer("rendered-twin-1", image('d'))
	other := &v1alpha1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: "twin-other"},
		Spec:       v1alpha1.MachineConfigPoolSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"twin-also": "yes"}}},
	}
	must(t, env.Client.Create(context.Background(), other))
	both := f.addNode("twin-both", map[string]string{"test-pool": "twin", "twin-also": "yes"}, image('0'))
	startController(t)
	f.waitTaken("rendered-twin-1", image('d'), 1)
	f.waitCondition(v1alpha1.PoolNodeDegraded, "True", v1alpha1.ReasonNodeConflict, "twin-both")
	f.waitCondition(v1alpha1.PoolDegraded, "True", "", "twin-both")
	if a := f.node(both).Annotations; a[v1alpha1.DesiredImageAnnotation] != "" {
		t.Errorf("a node in two pools was given %q", a[v1alpha1.DesiredImageAnnotation])
	}
}

func TestDeletingTheMachineOSConfigRollsBackAndADegradedNodeHalts(t *testing.T) {
	f := newFixture(t, "back", 3, func(p *v1alpha1.MachineConfigPool) { p.Spec.MaxUnavailable = ptrIntOrString(intstr.FromString("100%")) })
	cfg := "rendered-back-1"
	f.layer(cfg, image('e'))
	startController(t)
	f.waitTaken(cfg, image('e'), 3)
	f.finish("back-0")
	f.finish("back-1")
	f.annotate("back-2", v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded, v1alpha1.ReasonAnnotation, "image failed its health check; rolled back")
	f.waitCondition(v1alpha1.PoolNodeDegraded, "True", v1alpha1.ReasonNodesDegraded, "node back-2: image failed its health check")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRolloutHalted, "halted")

	must(t, env.Client.Delete(context.Background(), &v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: "back"}}))
	// Every node goes back to its original image, the failed one too.
	f.waitTaken(cfg, image('0'), 3)
	for _, n := range f.nodes {
		if got := f.node(n).Annotations[v1alpha1.ImagePullSecretAnnotation]; got != "" {
			t.Errorf("node %s keeps the pull secret %q of a deleted MachineOSConfig", n, got)
		}
		f.finish(n)
	}
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "on their original images")
	f.waitCondition(v1alpha1.PoolNodeDegraded, "False", "", "")
}

func TestUnpinnedOSImageAndImageOnlyContentAreReported(t *testing.T) {
	f := newFixture(t, "plain", 1, nil)
	ctx := context.Background()
	mc := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "rendered-plain-2"},
		Spec: v1alpha1.MachineConfigSpec{
			OSImageURL: "registry.example.com/os:latest",
			Config:     runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,x"}}]}}`)},
		},
	}
	must(t, env.Client.Create(ctx, mc))
	startController(t)
	f.waitTaken("rendered-plain-1", image('0'), 1)
	f.finish("plain-0")
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "on their original images")

	f.setConfig("rendered-plain-2")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonWaitingForImage, "not pinned by digest")

	mc.Spec.OSImageURL = image('f')
	must(t, env.Client.Update(ctx, mc))
	// The pool reconciles on its own events; a spec change of the rendered
	// config never happens in practice (they are immutable by name), so
	// nudge it through a new rendered config.
	mc2 := mc.DeepCopy()
	mc2.ObjectMeta = metav1.ObjectMeta{Name: "rendered-plain-3"}
	must(t, env.Client.Create(ctx, mc2))
	f.setConfig("rendered-plain-3")
	f.waitTaken("rendered-plain-3", image('f'), 1)
	f.finish("plain-0")
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonImageOnlyContent, "not applied, since the pool has no MachineOSConfig")
}

func ptrIntOrString(v intstr.IntOrString) *intstr.IntOrString { return &v }

// approve plays a scanner: it sets the build's ImageApproved condition.
func (f *fixture) approve(config string, status metav1.ConditionStatus, reason, msg string) {
	ctx := context.Background()
	b := &v1alpha1.MachineOSBuild{}
	must(f.t, env.Client.Get(ctx, client.ObjectKey{Name: f.pool + "-" + config}, b))
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildImageApproved, Status: status, Reason: reason, Message: msg})
	must(f.t, env.Client.Status().Update(ctx, b))
}

// waitPoolEvent waits for an Event on the fixture's pool of the given
// type and reason whose note holds want.
func (f *fixture) waitPoolEvent(typ, reason, want string) {
	f.t.Helper()
	eventually(f.t, fmt.Sprintf("a %s %s Event on pool %s saying %q", typ, reason, f.pool, want), func() error {
		var events eventsv1.EventList
		if err := env.Client.List(context.Background(), &events); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == "MachineConfigPool" && e.Regarding.Name == f.pool && e.Type == typ && e.Reason == reason && strings.Contains(e.Note, want) {
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(events.Items))
	})
}

func TestApprovalGateHoldsNodesUntilApproved(t *testing.T) {
	f := newFixture(t, "gate", 2, nil)
	f.layer("rendered-gate-1", image('a'))
	ctx := context.Background()
	mosc := &v1alpha1.MachineOSConfig{}
	must(t, env.Client.Get(ctx, client.ObjectKey{Name: "gate"}, mosc))
	mosc.Spec.ImageApproval = v1alpha1.ImageApprovalRequired
	must(t, env.Client.Update(ctx, mosc))
	startController(t)

	// Built, not approved: the pool says so and no node is taken.
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonAwaitingImageApproval, "The image of build gate-rendered-gate-1 ("+image('a')+") waits for approval")
	if got := f.taken("rendered-gate-1", image('a')); len(got) != 0 {
		t.Fatalf("nodes %v were sent an image nobody approved", got)
	}

	f.approve("rendered-gate-1", metav1.ConditionTrue, v1alpha1.ReasonApproved, "scan clean")
	f.waitTaken("rendered-gate-1", image('a'), 1)
	f.finish("gate-0")
	f.waitTaken("rendered-gate-1", image('a'), 2)
	f.finish("gate-1")
	f.waitCondition(v1alpha1.PoolUpdated, "True", v1alpha1.ReasonAllNodesUpdated, "")

	// A newer build goes through the gate again; rejected, it never rolls
	// out and the nodes stay on the approved image.
	f.rendered("rendered-gate-2")
	f.setConfig("rendered-gate-2")
	f.build("rendered-gate-2", image('b'), true)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonAwaitingImageApproval, "gate-rendered-gate-2")
	f.approve("rendered-gate-2", metav1.ConditionFalse, v1alpha1.ReasonRejected, "CVE-2026-0001 in /usr/bin/tool")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonImageRejected, "was rejected (Rejected: CVE-2026-0001 in /usr/bin/tool)")
	f.waitPoolEvent(corev1.EventTypeNormal, v1alpha1.ReasonAwaitingImageApproval, "gate-rendered-gate-2")
	f.waitPoolEvent(corev1.EventTypeWarning, v1alpha1.ReasonImageRejected, "CVE-2026-0001 in /usr/bin/tool")
	if got := f.taken("rendered-gate-2", image('b')); len(got) != 0 {
		t.Fatalf("nodes %v were sent a rejected image", got)
	}
	if got := f.taken("rendered-gate-1", image('a')); len(got) != 2 {
		t.Fatalf("nodes left the approved image: %v on it", got)
	}

	// A fixed build, approved, rolls out.
	f.rendered("rendered-gate-3")
	f.setConfig("rendered-gate-3")
	f.build("rendered-gate-3", image('c'), true)
	f.approve("rendered-gate-3", metav1.ConditionTrue, v1alpha1.ReasonApproved, "scan clean")
	f.waitTaken("rendered-gate-3", image('c'), 1)
}

// TestApprovalGateOffReleasesTheImage: turning the gate off rolls out the
// image it held, without anyone approving it.
func TestApprovalGateOffReleasesTheImage(t *testing.T) {
	f := newFixture(t, "gateoff", 1, nil)
	f.layer("rendered-gateoff-1", image('d'))
	ctx := context.Background()
	setApproval := func(a v1alpha1.ImageApproval) {
		t.Helper()
		must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			mosc := &v1alpha1.MachineOSConfig{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: "gateoff"}, mosc); err != nil {
				return err
			}
			mosc.Spec.ImageApproval = a
			return env.Client.Update(ctx, mosc)
		}))
	}
	setApproval(v1alpha1.ImageApprovalRequired)
	startController(t)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonAwaitingImageApproval, "gateoff-rendered-gateoff-1")
	if got := f.taken("rendered-gateoff-1", image('d')); len(got) != 0 {
		t.Fatalf("nodes %v were sent an image nobody approved", got)
	}
	setApproval(v1alpha1.ImageApprovalAutomatic)
	f.waitTaken("rendered-gateoff-1", image('d'), 1)
}
