package scale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/build"
	"github.com/strata-dev/strata/controllers/degraded"
	"github.com/strata-dev/strata/controllers/node"
	"github.com/strata-dev/strata/controllers/render"
	"github.com/strata-dev/strata/test/testenv"
	"github.com/strata-dev/strata/test/testregistry"
)

const (
	ns           = "strata-system"
	pools        = 100
	nodesPerPool = 10
	// workers create objects concurrently, as many clients would.
	workers = 8
	// quietFor is how long every counter must stay still, with every
	// work queue empty and no reconcile running, for the controllers to
	// count as done with an event. Reconciles take milliseconds here.
	quietFor = 1500 * time.Millisecond
	timeout  = 90 * time.Second
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		// Errors only: a reconcile error is worth reading, 100 builds'
		// progress is not.
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
		return env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
}

// TestOneChangeCostsOnePool builds 100 layered pools with 10 nodes each,
// waits until everything is built, rolled out and quiet, and then measures
// single changes, each from a quiet state: what it costs must not grow
// with the number of pools or nodes.
func TestOneChangeCostsOnePool(t *testing.T) {
	ctx := context.Background()
	started := time.Now()
	reg := testregistry.Start(t, "")
	base := pushBase(t, reg)
	api := &apiCounter{counts: map[string]int{}}
	startManager(t, reg, api)

	createWorld(t, reg.Host, base)
	images := waitBuilt(t)
	createNodes(t, images, base)
	waitRolledOut(t)
	quiet := waitQuiet(t, api)
	t.Logf("setup: %d pools, %d MachineOSConfigs built, %d nodes, quiet after %s", pools, pools, pools*nodesPerPool, time.Since(started).Round(time.Second))
	rows := []row{{event: "setup (for scale)", d: diff(counters{}, quiet)}}

	// (a) A Secret one MachineOSConfig names changes.
	r, quiet := measure(t, api, quiet, "Secret of 1 MachineOSConfig relabelled", func() {
		patchMeta(t, &corev1.Secret{}, client.ObjectKey{Namespace: ns, Name: pushSecret(42)}, func(o client.Object) {
			o.SetLabels(map[string]string{"rotated": "yes"})
		})
	}, func(d delta) error { return d.atLeast("build", 1) })
	r.want(t, map[string][2]int{"build": {1, 1}, "render": {0, 0}, "render-gc": {0, 0}, "rollout": {0, 0}, "drain": {0, 0}})
	r.wantAPI(t, "list", 0)
	r.wantAPI(t, "all", 0)
	rows = append(rows, r)

	// (b) A node annotation that is no config changes.
	r, quiet = measure(t, api, quiet, "Node annotation (not config) changed", func() {
		patchMeta(t, &corev1.Node{}, client.ObjectKey{Name: nodeName(42, 3)}, func(o client.Object) {
			a := o.GetAnnotations()
			a["example.com/owner"] = "team-42"
			o.SetAnnotations(a)
		})
	}, func(d delta) error { return d.atLeast("rollout", 1) })
	r.want(t, map[string][2]int{"build": {0, 0}, "render": {0, 0}, "render-gc": {0, 0}, "rollout": {1, 1}, "drain": {0, 0}})
	r.wantAPI(t, "list", 0)
	r.wantAPI(t, "all", 0)
	rows = append(rows, r)

	// (c) A MachineConfig one pool selects changes content: that pool
	// re-renders, builds once, and its rollout takes a node.
	before := renderedConfigs(t)
	r, quiet = measure(t, api, quiet, "MachineConfig of 1 pool changed", func() {
		mc := &v1alpha1.MachineConfig{}
		must(t, env.Client.Get(ctx, client.ObjectKey{Name: mcName(7)}, mc))
		mc.Spec.Config = fileConfig("/etc/strata/pool", poolName(7)+" v2")
		must(t, env.Client.Update(ctx, mc))
	}, func(delta) error { return nodeTaken(t, 7, before[poolName(7)]) })
	after := renderedConfigs(t)
	var changed []string
	for p, c := range after {
		if before[p] != c {
			changed = append(changed, p)
		}
	}
	if !slices.Equal(changed, []string{poolName(7)}) {
		t.Errorf("pools with a new rendered config: %v, want only %s", changed, poolName(7))
	}
	r.want(t, map[string][2]int{"render": {1, 2}, "render-gc": {1, 2}, "build": {1, 8}, "rollout": {1, 8}, "drain": {0, 0}})
	r.wantAPI(t, "list", 0)
	r.wantAPI(t, "create machineconfigs", 1)
	r.wantAPI(t, "create machineosbuilds", 1)
	rows = append(rows, r)

	// (d) The node the rollout took reports the new config as current:
	// its pool's collector looks at the config it released, nothing
	// re-renders, and the rollout takes the next node.
	r, _ = measure(t, api, quiet, "Node currentConfig changed", func() {
		n := takenNode(t, 7, after[poolName(7)])
		patchMeta(t, &corev1.Node{}, client.ObjectKey{Name: n}, func(o client.Object) {
			a := o.GetAnnotations()
			a[v1alpha1.CurrentConfigAnnotation] = a[v1alpha1.DesiredConfigAnnotation]
			a[v1alpha1.CurrentImageAnnotation] = a[v1alpha1.DesiredImageAnnotation]
			a[v1alpha1.StateAnnotation] = v1alpha1.NodeStateDone
			o.SetAnnotations(a)
		})
	}, func(delta) error { return nodesOn(t, 7, after[poolName(7)], 2) })
	// The rollout writes the pool's machine counts; the build controller
	// ignores pool changes that do not concern a build.
	r.want(t, map[string][2]int{"render": {0, 0}, "render-gc": {1, 1}, "build": {0, 0}, "rollout": {1, 4}, "drain": {0, 0}})
	r.wantAPI(t, "list", 0)
	rows = append(rows, r)

	for i, r := range rows {
		// Nobody edits a rendered config here: an update would be the
		// render controller rewriting one it failed to recognise.
		r.wantAPI(t, "update machineconfigs", 0)
		// Each controller applies only its share of a pool's status,
		// so no pool status write is ever refused for a conflict.
		r.wantAPI(t, "conflict patch machineconfigpools/status", 0)
		// A change can still bring a reconcile that read its own
		// object's previous write from a cache not yet updated; its
		// optimistic lock refuses it and it runs again (reported in the
		// table). Events that change nothing Strata builds from cost
		// nothing, conflicts included.
		if i == 1 || i == 2 {
			r.wantAPI(t, "conflict", 0)
		}
	}
	logTable(t, rows)
	t.Logf("total run time %s", time.Since(started).Round(time.Second))
}

// startManager runs the reconcilers as cmd/strata-controller wires them,
// with the same cache options, through a transport that counts requests.
func startManager(t *testing.T, reg *testregistry.Registry, api *apiCounter) {
	t.Helper()
	counted := *env
	counted.Config = rest.CopyConfig(env.Config)
	counted.Config.Wrap(api.wrap)
	// The client's default rate limit (QPS 20) would make setup, not
	// the controllers, the thing measured; production sets its own.
	counted.Config.QPS, counted.Config.Burst = 500, 1000
	byObject := build.CacheByObject(ns)
	maps.Copy(byObject, node.CacheByObject())
	counted.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: byObject}}, func(mgr ctrl.Manager) error {
		if err := (&render.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-render")}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := (&render.GCReconciler{Client: mgr.GetClient(), History: render.DefaultHistory}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := (&build.Reconciler{
			Client:   mgr.GetClient(),
			Recorder: mgr.GetEventRecorder("strata-build"),
			Config: build.Config{
				Namespace: ns,
				// Never run: ConfigLayer builds without a Containerfile
				// are made in the controller.
				BuilderImage:       "127.0.0.1:5000/strata/builder@sha256:" + strings.Repeat("b", 64),
				InsecureRegistries: []string{reg.Host},
			},
		}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := (&node.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-rollout")}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := (&node.DrainReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-drain")}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&degraded.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
}

func pushBase(t *testing.T, reg *testregistry.Registry) string {
	t.Helper()
	img, err := random.Image(256, 1)
	must(t, err)
	ref, err := name.ParseReference(reg.Host+"/strata/base:1", name.Insecure)
	must(t, err)
	must(t, remote.Write(ref, img))
	d, err := img.Digest()
	must(t, err)
	return reg.Host + "/strata/base@" + d.String()
}

func poolName(i int) string    { return fmt.Sprintf("pool-%03d", i) }
func mcName(i int) string      { return fmt.Sprintf("50-%s", poolName(i)) }
func pushSecret(i int) string  { return fmt.Sprintf("push-%03d", i) }
func nodeName(i, j int) string { return fmt.Sprintf("node-%03d-%02d", i, j) }

const poolKey = "scale.strata.dev/pool"

func fileConfig(path, content string) runtime.RawExtension {
	return runtime.RawExtension{Raw: fmt.Appendf(nil,
		`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":%q,"mode":420,"contents":{"source":"data:,%s"}}]}}`,
		path, strings.ReplaceAll(content, " ", "%20"))}
}

// createWorld makes a MachineConfig every pool selects and, per pool, a
// MachineConfig, the pool, a push Secret and a MachineOSConfig.
func createWorld(t *testing.T, host, base string) {
	t.Helper()
	ctx := context.Background()
	common := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "00-common", Labels: map[string]string{poolKey: "all"}},
		Spec:       v1alpha1.MachineConfigSpec{Config: fileConfig("/etc/strata/common", "common")},
	}
	must(t, env.Client.Create(ctx, common))
	parallel(t, pools, func(i int) error {
		objs := []client.Object{
			&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pushSecret(i)},
				Type:       corev1.SecretTypeDockerConfigJson,
				Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
			},
			&v1alpha1.MachineConfig{
				ObjectMeta: metav1.ObjectMeta{Name: mcName(i), Labels: map[string]string{poolKey: poolName(i)}},
				Spec:       v1alpha1.MachineConfigSpec{Config: fileConfig("/etc/strata/pool", poolName(i))},
			},
			&v1alpha1.MachineConfigPool{
				ObjectMeta: metav1.ObjectMeta{Name: poolName(i)},
				Spec: v1alpha1.MachineConfigPoolSpec{
					MachineConfigSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: poolKey, Operator: metav1.LabelSelectorOpIn, Values: []string{"all", poolName(i)}},
					}},
					NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{poolKey: poolName(i)}},
				},
			},
			&v1alpha1.MachineOSConfig{
				ObjectMeta: metav1.ObjectMeta{Name: poolName(i)},
				Spec: v1alpha1.MachineOSConfigSpec{
					MachineConfigPool:       v1alpha1.LocalObjectReference{Name: poolName(i)},
					ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder, Strategy: v1alpha1.ConfigLayerStrategy},
					BaseImagePullSpec:       base,
					RenderedImagePushSecret: v1alpha1.SecretReference{Name: pushSecret(i)},
					RenderedImagePushSpec:   host + "/strata/" + poolName(i) + ":latest",
				},
			},
		}
		for _, o := range objs {
			if err := env.Client.Create(ctx, o); err != nil {
				return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
			}
		}
		return nil
	})
}

// poolImage is what a pool's nodes are to run once built.
type poolImage struct{ config, image string }

// waitBuilt waits until every MachineOSConfig's build of its pool's
// current rendered config has succeeded.
func waitBuilt(t *testing.T) map[string]poolImage {
	t.Helper()
	ctx := context.Background()
	out := map[string]poolImage{}
	testenv.Eventually(t, timeout, "every MachineOSConfig built", func() error {
		var ps v1alpha1.MachineConfigPoolList
		var bs v1alpha1.MachineOSBuildList
		var ms v1alpha1.MachineOSConfigList
		for _, l := range []client.ObjectList{&ps, &bs, &ms} {
			if err := env.Client.List(ctx, l); err != nil {
				return err
			}
		}
		builds := map[string]*v1alpha1.MachineOSBuild{}
		for i := range bs.Items {
			builds[bs.Items[i].Name] = &bs.Items[i]
		}
		config := map[string]string{}
		for _, p := range ps.Items {
			config[p.Name] = p.Status.Configuration.Name
		}
		done := 0
		for _, m := range ms.Items {
			if m.Status.MachineOSBuild == nil {
				continue
			}
			b := builds[m.Status.MachineOSBuild.Name]
			if b == nil || b.Spec.MachineConfig.Name != config[m.Spec.MachineConfigPool.Name] ||
				!meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildSucceeded) {
				continue
			}
			out[m.Spec.MachineConfigPool.Name] = poolImage{config: b.Spec.MachineConfig.Name, image: b.Status.DigestedImagePushSpec}
			done++
		}
		if done != pools {
			return fmt.Errorf("%d of %d built", done, pools)
		}
		return nil
	})
	return out
}

// createNodes makes every pool's nodes as they are once updated: Ready,
// running the pool's image and config, as their daemons would report.
func createNodes(t *testing.T, images map[string]poolImage, base string) {
	t.Helper()
	ctx := context.Background()
	parallel(t, pools*nodesPerPool, func(k int) error {
		i, j := k/nodesPerPool, k%nodesPerPool
		want := images[poolName(i)]
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:   nodeName(i, j),
				Labels: map[string]string{poolKey: poolName(i), corev1.LabelHostname: nodeName(i, j)},
				Annotations: map[string]string{
					v1alpha1.CurrentConfigAnnotation:      want.config,
					v1alpha1.DesiredConfigAnnotation:      want.config,
					v1alpha1.CurrentImageAnnotation:       want.image,
					v1alpha1.DesiredImageAnnotation:       want.image,
					v1alpha1.OriginalImageAnnotation:      base,
					v1alpha1.NodePoolAnnotation:           poolName(i),
					v1alpha1.HealthCheckTimeoutAnnotation: node.DefaultHealthCheckTimeout.String(),
					v1alpha1.StateAnnotation:              v1alpha1.NodeStateDone,
				},
			},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(),
			}}},
		}
		return env.Client.Create(ctx, n)
	})
}

// waitRolledOut waits until every pool counts its nodes, all updated.
func waitRolledOut(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, timeout, "every pool updated", func() error {
		var ps v1alpha1.MachineConfigPoolList
		if err := env.Client.List(context.Background(), &ps); err != nil {
			return err
		}
		for _, p := range ps.Items {
			if p.Status.MachineCount != nodesPerPool || p.Status.UpdatedMachineCount != nodesPerPool || p.Status.ReadyMachineCount != nodesPerPool ||
				!meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.PoolUpdated) {
				return fmt.Errorf("pool %s: %d machines, %d updated, %d ready, Updated %v", p.Name,
					p.Status.MachineCount, p.Status.UpdatedMachineCount, p.Status.ReadyMachineCount, meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PoolUpdated))
			}
		}
		return nil
	})
}

func renderedConfigs(t *testing.T) map[string]string {
	t.Helper()
	var ps v1alpha1.MachineConfigPoolList
	must(t, env.Client.List(context.Background(), &ps))
	out := map[string]string{}
	for _, p := range ps.Items {
		out[p.Name] = p.Status.Configuration.Name
	}
	return out
}

// poolNodes are pool i's nodes.
func poolNodes(t *testing.T, i int) []corev1.Node {
	t.Helper()
	var list corev1.NodeList
	must(t, env.Client.List(context.Background(), &list, client.MatchingLabels{poolKey: poolName(i)}))
	return list.Items
}

// nodeTaken says whether pool i has a new rendered config (not old) and
// the rollout sent it, with its image, to a node.
func nodeTaken(t *testing.T, i int, old string) error {
	for _, n := range poolNodes(t, i) {
		if c := n.Annotations[v1alpha1.DesiredConfigAnnotation]; c != "" && c != old {
			return nil
		}
	}
	return fmt.Errorf("no node of %s was sent a new config", poolName(i))
}

// takenNode is the node of pool i that was sent config.
func takenNode(t *testing.T, i int, config string) string {
	t.Helper()
	for _, n := range poolNodes(t, i) {
		if n.Annotations[v1alpha1.DesiredConfigAnnotation] == config {
			return n.Name
		}
	}
	t.Fatalf("no node of %s was sent %s", poolName(i), config)
	return ""
}

// nodesOn says whether at least want nodes of pool i were sent config.
func nodesOn(t *testing.T, i int, config string, want int) error {
	got := 0
	for _, n := range poolNodes(t, i) {
		if n.Annotations[v1alpha1.DesiredConfigAnnotation] == config {
			got++
		}
	}
	if got < want {
		return fmt.Errorf("%d nodes of %s sent %s, want %d", got, poolName(i), config, want)
	}
	return nil
}

// patchMeta changes an object's metadata with a retry on conflict.
func patchMeta(t *testing.T, obj client.Object, key client.ObjectKey, change func(client.Object)) {
	t.Helper()
	ctx := context.Background()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, key, obj); err != nil {
			return err
		}
		change(obj)
		return env.Client.Update(ctx, obj)
	}))
}

// parallel runs fn for 0..n-1 on a few goroutines and fails the test on
// the first error.
func parallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for i := range next {
				if first == nil {
					first = fn(i)
				}
			}
			errs <- first
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	must(t, errors.Join(all...))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// apiCounter counts the manager's requests to the API server by verb and
// resource ("list nodes", "patch machineconfigpools/status"), and the
// ones refused with a conflict apart ("conflict patch
// machineosbuilds/status"): a conflict is a write computed from stale
// data, done again.
type apiCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		key := requestKey(req)
		c.mu.Lock()
		c.counts[key]++
		c.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusConflict {
			c.mu.Lock()
			c.counts["conflict "+key]++
			c.mu.Unlock()
		}
		return resp, err
	})
}

func (c *apiCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestKey is "verb resource[/subresource]" of a request, the verb as
// the API server's audit log names it.
func requestKey(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "discovery " + req.URL.Path
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return "discovery " + req.URL.Path
	}
	resource := parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	named := len(parts) >= 2
	verb := map[string]string{
		http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete",
	}[req.Method]
	if req.Method == http.MethodGet {
		switch {
		case req.URL.Query().Get("watch") == "true":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	}
	return verb + " " + resource
}

// controllers are the reconcilers whose reconciles are counted.
var controllers = []string{"render", "render-gc", "build", "rollout", "drain", "pool-degraded"}

// counters is what the test reads of the controllers at one moment.
type counters struct {
	reconciles map[string]int
	errors     map[string]int
	api        map[string]int
	busy       int // items queued and reconciles running
}

func read(t *testing.T, api *apiCounter) counters {
	t.Helper()
	c := counters{reconciles: map[string]int{}, errors: map[string]int{}, api: api.snapshot()}
	families, err := metrics.Registry.Gather()
	must(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "controller_runtime_reconcile_total":
				c.reconciles[labels["controller"]] += int(m.GetCounter().GetValue())
			case "controller_runtime_reconcile_errors_total":
				c.errors[labels["controller"]] += int(m.GetCounter().GetValue())
			case "workqueue_depth":
				c.busy += int(m.GetGauge().GetValue())
			case "controller_runtime_active_workers":
				c.busy += int(m.GetGauge().GetValue())
			}
		}
	}
	return c
}

func (c counters) same(o counters) bool {
	return maps.Equal(c.reconciles, o.reconciles) && maps.Equal(c.errors, o.errors) && maps.Equal(c.api, o.api)
}

// waitQuiet waits until no queue holds work, no reconcile runs and no
// counter has moved for quietFor, and returns the counters then.
func waitQuiet(t *testing.T, api *apiCounter) counters {
	t.Helper()
	last := read(t, api)
	since := time.Now()
	testenv.Eventually(t, timeout, "the controllers go quiet", func() error {
		now := read(t, api)
		if now.busy > 0 || !now.same(last) {
			last, since = now, time.Now()
			return fmt.Errorf("busy (%d queued or running) or counters moved", now.busy)
		}
		if time.Since(since) < quietFor {
			return fmt.Errorf("still for %s of %s", time.Since(since).Round(time.Millisecond), quietFor)
		}
		return nil
	})
	return last
}

// delta is what changed between two readings.
type delta struct {
	reconciles, errors, api map[string]int
}

func diff(before, after counters) delta {
	d := delta{reconciles: map[string]int{}, errors: map[string]int{}, api: map[string]int{}}
	for _, c := range controllers {
		d.reconciles[c] = after.reconciles[c] - before.reconciles[c]
		d.errors[c] = after.errors[c] - before.errors[c]
	}
	for k, v := range after.api {
		if n := v - before.api[k]; n != 0 {
			d.api[k] = n
		}
	}
	return d
}

func (d delta) atLeast(controller string, n int) error {
	if d.reconciles[controller] < n {
		return fmt.Errorf("%s reconciled %d times, waiting for %d", controller, d.reconciles[controller], n)
	}
	return nil
}

// apiCount sums the requests whose key starts with prefix ("list",
// "create machineosbuilds"); "all" sums every request.
func (d delta) apiCount(prefix string) int {
	n := 0
	for k, v := range d.api {
		if prefix == "all" || k == prefix || strings.HasPrefix(k, prefix+" ") {
			n += v
		}
	}
	return n
}

// row is one measured change.
type row struct {
	event string
	d     delta
}

// measure makes one change from a quiet state, waits until it has had
// the effect done checks and the controllers are quiet again, and returns
// what it cost with the new quiet state.
func measure(t *testing.T, api *apiCounter, quiet counters, event string, change func(), done func(delta) error) (row, counters) {
	t.Helper()
	change()
	testenv.Eventually(t, timeout, event+": the controllers react", func() error {
		return done(diff(quiet, read(t, api)))
	})
	after := waitQuiet(t, api)
	r := row{event: event, d: diff(quiet, after)}
	for c, n := range r.d.errors {
		if n > 0 {
			t.Errorf("%s: %s returned %d errors", event, c, n)
		}
	}
	return r, after
}

// want checks each controller's reconciles against [min, max].
func (r row) want(t *testing.T, bounds map[string][2]int) {
	t.Helper()
	for _, c := range controllers {
		b, ok := bounds[c]
		if !ok {
			continue
		}
		if got := r.d.reconciles[c]; got < b[0] || got > b[1] {
			t.Errorf("%s: %s reconciled %d times, want %d to %d", r.event, c, got, b[0], b[1])
		}
	}
}

// wantAPI checks a number of API requests (see apiCount).
func (r row) wantAPI(t *testing.T, prefix string, want int) {
	t.Helper()
	if got := r.d.apiCount(prefix); got != want {
		t.Errorf("%s: %d %q API requests, want %d (%v)", r.event, got, prefix, want, r.d.api)
	}
}

func logTable(t *testing.T, rows []row) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-40s", "event ("+fmt.Sprint(pools)+" pools, "+fmt.Sprint(pools*nodesPerPool)+" nodes)")
	for _, c := range controllers {
		fmt.Fprintf(&b, " %9s", c)
	}
	fmt.Fprintf(&b, " %6s %6s %6s %6s %9s\n", "API", "list", "writes", "events", "conflicts")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-40s", r.event)
		for _, c := range controllers {
			fmt.Fprintf(&b, " %9d", r.d.reconciles[c])
		}
		events := r.d.apiCount("create events") + r.d.apiCount("patch events")
		writes := r.d.apiCount("create") + r.d.apiCount("update") + r.d.apiCount("patch") + r.d.apiCount("delete") - events
		conflicts := r.d.apiCount("conflict")
		fmt.Fprintf(&b, " %6d %6d %6d %6d %9d\n", r.d.apiCount("all")-conflicts, r.d.apiCount("list"), writes, events, conflicts)
	}
	b.WriteString("API requests by verb and resource:\n")
	for _, r := range rows {
		keys := slices.Sorted(maps.Keys(r.d.api))
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.d.api[k]))
		}
		fmt.Fprintf(&b, "  %s: %s\n", r.event, strings.Join(parts, ", "))
	}
	t.Log(b.String())
}
