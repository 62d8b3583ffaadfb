package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node"
	"github.com/strata-dev/strata/internal/history"
	"github.com/strata-dev/strata/test/testenv"
)

const (
	pool    = "fleet"
	zoneKey = "topology.kubernetes.io/zone"
	oldCfg  = "rendered-fleet-0"
	newCfg  = "rendered-fleet-1"
)

var (
	env    *testenv.Env
	zones  = []string{"eu-1a", "eu-1b", "eu-1c"}
	imageA = "registry.example.com/os@sha256:" + strings.Repeat("a", 64)
	imageB = "registry.example.com/os@sha256:" + strings.Repeat("b", 64)
)

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
		return nil
	})
}

// fleetNode is one simulated node: its zone, how long its update takes,
// and whether it fails.
type fleetNode struct {
	name, zone string
	update     time.Duration
	fails      bool
}

// The fleet: nodes in name order round-robin over the zones (so that name
// order, the planner's turn, interleaves them); update times 100 ms plus
// an exponential of mean 100 ms, capped at 1 s (a fleet's long tail,
// scaled from minutes to milliseconds); one node in 200 fails.
func fleet(n int) []fleetNode {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]fleetNode, n)
	for i := range out {
		d := 100*time.Millisecond + time.Duration(min(r.ExpFloat64()*100, 900)*float64(time.Millisecond))
		out[i] = fleetNode{name: fmt.Sprintf("fleet-%04d", i), zone: zones[i%len(zones)], update: d, fails: i%200 == 199}
	}
	return out
}

// BenchmarkFleetRollout rolls image B out to 1,000 nodes in 3 zones:
// steps of 1 node, 5%, 25% and 100%, a 95% success threshold, at most 1
// node unavailable per zone and 10% of the pool.
func BenchmarkFleetRollout(b *testing.B) {
	n := 1000
	if s := os.Getenv("STRATA_FLEET_NODES"); s != "" {
		_, _ = fmt.Sscan(s, &n)
	}
	nodes := fleet(n)
	for b.Loop() {
		rolloutOnce(b, nodes)
	}
}

func rolloutOnce(b *testing.B, nodes []fleetNode) {
	writes := &writeCounter{}
	createWorld(b, nodes)
	w := newWatch(b, nodes)
	stopDaemons := startDaemons(nodes)
	defer stopDaemons()

	cpu0 := cpuTime()
	started := time.Now()
	startControllers(b, writes)
	layer(b)
	deadline := time.Now().Add(20 * time.Minute)
	for !w.done() {
		if time.Now().After(deadline) {
			b.Fatalf("the rollout did not finish: %s", w.progress())
		}
		time.Sleep(100 * time.Millisecond) // poll interval, not synchronisation
	}
	wall := time.Since(started)
	cpu := cpuTime() - cpu0
	ideal := idealTime(nodes)
	var rss syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &rss)

	b.ReportMetric(wall.Seconds(), "wall-s")
	b.ReportMetric(ideal.Seconds(), "ideal-s")
	b.ReportMetric(float64(w.violations.Load()), "violations")
	b.ReportMetric(float64(writes.nodeWrites.Load())/float64(len(nodes)), "writes/node")
	fmt.Printf("fleet rollout: %d nodes in %d zones, steps 1/5%%/25%%/100%% at 95%%, maxUnavailable 1 per zone and 10%% of the pool\n", len(nodes), len(zones))
	fmt.Printf("  wall time        %8.1f s   (ideal for these budgets %.1f s: %+.1f%%)\n", wall.Seconds(), ideal.Seconds(), 100*(wall.Seconds()/ideal.Seconds()-1))
	fmt.Printf("  budget exceeded  %8d     (times a zone had more than 1, or the pool more than 10%%, unavailable)\n", w.violations.Load())
	fmt.Printf("  API writes/node  %8.1f     (the controllers' writes to Nodes: %d, all writes: %d)\n",
		float64(writes.nodeWrites.Load())/float64(len(nodes)), writes.nodeWrites.Load(), writes.all.Load())
	fmt.Printf("  failed nodes     %8d     (drawn: one in 200)\n", w.failed())
	fmt.Printf("  CPU              %8.1f s   (the test process: controllers and simulated daemons; the API server apart)\n", cpu.Seconds())
	fmt.Printf("  peak RSS         %8d MB  (the test process)\n", rss.Maxrss/1024)
	if v := w.violations.Load(); v > 0 {
		b.Errorf("budgets exceeded %d times", v)
	}
}

// createWorld makes the pool (topology and steps), its rendered configs
// and the nodes, each on the old config and image, Ready, with its zone.
func createWorld(b *testing.B, nodes []fleetNode) {
	ctx := context.Background()
	c := env.Client
	ten := intstr.FromString("10%")
	one := intstr.FromInt32(1)
	failed := int32(len(nodes)/100 + 5)
	p := &v1alpha1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.MachineConfigPoolSpec{
			NodeSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": "yes"}},
			MaxUnavailable: &ten, MaxFailedNodes: &failed,
			Topology: &v1alpha1.RolloutTopology{Key: zoneKey, MaxUnavailable: &one},
			Progressive: &v1alpha1.ProgressiveRollout{
				Steps:            []v1alpha1.RolloutStep{{Nodes: intstr.FromInt32(1)}, {Nodes: intstr.FromString("5%")}, {Nodes: intstr.FromString("25%")}, {Nodes: intstr.FromString("100%")}},
				SuccessThreshold: ptr(intstr.FromString("95%")),
			},
		},
	}
	must(b, c.Create(ctx, p))
	for _, name := range []string{oldCfg, newCfg} {
		must(b, c.Create(ctx, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"}}`)}}}))
	}
	p.Status.Configuration.Name = newCfg
	must(b, c.Status().Update(ctx, p))
	parallel(b, len(nodes), func(i int) error {
		n := nodes[i]
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"fleet": "yes", zoneKey: n.zone},
			Annotations: map[string]string{
				v1alpha1.OriginalImageAnnotation: imageA, v1alpha1.CurrentImageAnnotation: imageA, v1alpha1.DesiredImageAnnotation: imageA,
				v1alpha1.CurrentConfigAnnotation: oldCfg, v1alpha1.DesiredConfigAnnotation: oldCfg, v1alpha1.StateAnnotation: v1alpha1.NodeStateDone,
			}}}
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
		obj.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Fleet", LastHeartbeatTime: metav1.Now()}}
		return c.Status().Update(ctx, obj)
	})
}

// layer gives the pool its target, as the build controller would: a
// MachineOSConfig whose build of the new config succeeded with image B.
func layer(b *testing.B) {
	ctx := context.Background()
	c := env.Client
	mosc := &v1alpha1.MachineOSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: pool},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
			BaseImagePullSpec:       "registry.example.com/base:latest",
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: "push"},
			RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "pull"},
			RenderedImagePushSpec:   "registry.example.com/os:fleet",
		},
	}
	must(b, c.Create(ctx, mosc))
	p := &v1alpha1.MachineConfigPool{}
	must(b, c.Get(ctx, client.ObjectKey{Name: pool}, p))
	p.Annotations = map[string]string{v1alpha1.LayeredByAnnotation: pool}
	must(b, c.Update(ctx, p))
	build := &v1alpha1.MachineOSBuild{
		ObjectMeta: metav1.ObjectMeta{Name: pool + "-" + newCfg,
			Labels:          map[string]string{v1alpha1.PoolLabel: pool, v1alpha1.MachineOSConfigLabel: pool},
			Annotations:     map[string]string{v1alpha1.CreatedAnnotation: history.Stamp()},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(mosc, v1alpha1.GroupVersion.WithKind("MachineOSConfig"))}},
		Spec: v1alpha1.MachineOSBuildSpec{MachineConfig: v1alpha1.LocalObjectReference{Name: newCfg},
			MachineOSConfig: v1alpha1.LocalObjectReference{Name: pool}, RenderedImagePushSpec: "registry.example.com/os:fleet"},
	}
	must(b, c.Create(ctx, build))
	build.Status.DigestedImagePushSpec = imageB
	meta.SetStatusCondition(&build.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBuildSucceeded, Message: "built"})
	must(b, c.Status().Update(ctx, build))
	must(b, c.Get(ctx, client.ObjectKey{Name: pool}, mosc))
	mosc.Status.MachineOSBuild = &v1alpha1.LocalObjectReference{Name: build.Name}
	mosc.Status.CurrentImagePullSpec = imageB
	must(b, c.Status().Update(ctx, mosc))
}

// startControllers runs the rollout and drain reconcilers, their requests
// counted.
func startControllers(b *testing.B, writes *writeCounter) {
	counted := *env
	counted.Config = rest.CopyConfig(env.Config)
	counted.Config.Wrap(writes.wrap)
	counted.Config.QPS, counted.Config.Burst = 500, 1000
	counted.StartManager(b, ctrl.Options{Cache: crcache.Options{ByObject: node.CacheByObject()}}, func(mgr ctrl.Manager) error {
		if err := (&node.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-rollout")}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&node.DrainReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-drain")}).SetupWithManager(mgr)
	})
}

// writeCounter counts the controllers' writes: to Nodes apart.
type writeCounter struct{ all, nodeWrites atomic.Int64 }

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			w.all.Add(1)
			if strings.Contains(req.URL.Path, "/api/v1/nodes/") {
				w.nodeWrites.Add(1)
			}
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// startDaemons plays every node's daemon from one informer and a work
// queue: asked for the new pair, it reports Working and asks for the
// drain; drained, it takes the node's update time, then reports Done on
// the pair (or Degraded, rolled back, for a failing node) and asks for
// the uncordon.
func startDaemons(nodes []fleetNode) (stop func()) {
	byName := map[string]fleetNode{}
	for _, n := range nodes {
		byName[n.name] = n
	}
	cs := kubernetes.NewForConfigOrDie(rest.CopyConfig(env.Config))
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	writer := kubernetes.NewForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Nodes().Informer()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	var updating sync.Map // node → the pair whose update time is running
	enqueue := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			if _, mine := byName[n.Name]; mine {
				q.Add(n.Name)
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	patch := func(name string, ann map[string]any) error {
		raw := fmt.Appendf(nil, `{"metadata":{"annotations":%s}}`, mustJSON(ann))
		_, err := writer.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, raw, metav1.PatchOptions{})
		return err
	}
	step := func(name string) error {
		obj, ok, err := inf.GetStore().GetByKey(name)
		if err != nil || !ok {
			return err
		}
		n := obj.(*corev1.Node)
		a := n.Annotations
		cfg, img := a[v1alpha1.DesiredConfigAnnotation], a[v1alpha1.DesiredImageAnnotation]
		key := v1alpha1.UpdateKey(img, cfg)
		drain := v1alpha1.DrainRequestPrefix + key
		switch st := a[v1alpha1.StateAnnotation]; {
		case st == v1alpha1.NodeStateDone && (cfg != a[v1alpha1.CurrentConfigAnnotation] || img != a[v1alpha1.CurrentImageAnnotation]):
			return patch(name, map[string]any{v1alpha1.StateAnnotation: v1alpha1.NodeStateWorking, v1alpha1.DesiredDrainAnnotation: drain})
		case st == v1alpha1.NodeStateWorking && a[v1alpha1.LastAppliedDrainAnnotation] == drain:
			if _, running := updating.LoadOrStore(name, key); running {
				return nil
			}
			fn := byName[name]
			// The update's own time: simulated work, not a wait on state.
			time.AfterFunc(fn.update, func() {
				defer updating.Delete(name)
				done := map[string]any{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.CurrentConfigAnnotation: cfg,
					v1alpha1.CurrentImageAnnotation: img, v1alpha1.DesiredDrainAnnotation: v1alpha1.UncordonRequestPrefix + key}
				if fn.fails {
					done = map[string]any{v1alpha1.StateAnnotation: v1alpha1.NodeStateDegraded,
						v1alpha1.ReasonAnnotation:       "simulated: the image failed its health check; rolled back",
						v1alpha1.DesiredDrainAnnotation: v1alpha1.UncordonRequestPrefix + key}
				}
				if err := patch(name, done); err != nil {
					q.AddRateLimited(name)
				}
			})
		}
		return nil
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				name, shutdown := q.Get()
				if shutdown {
					return
				}
				if err := step(name); err != nil {
					q.AddRateLimited(name)
				} else {
					q.Forget(name)
				}
				q.Done(name)
			}
		})
	}
	return func() {
		cancel()
		q.ShutDown()
		wg.Wait()
	}
}

// watch follows the nodes and counts every time a budget is exceeded: a
// zone with more than one node unavailable, or the pool with more than
// 10%. Unavailable is what the planner counts (not Done on the pair it
// was sent, or cordoned), a settled failure and a quarantine aside.
type watch struct {
	mu         sync.Mutex
	state      map[string]*corev1.Node
	zoneOf     map[string]string
	violations atomic.Int64
	total      int
}

func newWatch(b *testing.B, nodes []fleetNode) *watch {
	w := &watch{state: map[string]*corev1.Node{}, zoneOf: map[string]string{}, total: len(nodes)}
	for _, n := range nodes {
		w.zoneOf[n.name] = n.zone
	}
	cs := kubernetes.NewForConfigOrDie(rest.CopyConfig(env.Config))
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Nodes().Informer()
	on := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			w.observe(n)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, o any) { on(o) }})
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	return w
}

func unavailable(n *corev1.Node) bool {
	a := n.Annotations
	if a[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDegraded {
		return false // settled: counted as failed
	}
	return a[v1alpha1.StateAnnotation] != v1alpha1.NodeStateDone || n.Spec.Unschedulable ||
		a[v1alpha1.DesiredImageAnnotation] != a[v1alpha1.CurrentImageAnnotation] ||
		a[v1alpha1.DesiredConfigAnnotation] != a[v1alpha1.CurrentConfigAnnotation]
}

func (w *watch) observe(n *corev1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.zoneOf[n.Name]; !ok {
		return
	}
	w.state[n.Name] = n
	perZone := map[string]int{}
	all := 0
	for name, m := range w.state {
		if unavailable(m) {
			perZone[w.zoneOf[name]]++
			all++
		}
	}
	limit := int(math.Floor(0.1 * float64(w.total)))
	for _, c := range perZone {
		if c > 1 {
			w.violations.Add(1)
		}
	}
	if all > limit {
		w.violations.Add(1)
	}
}

// done: every node runs the new pair or failed on it.
func (w *watch) done() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.state) < w.total {
		return false
	}
	for _, n := range w.state {
		a := n.Annotations
		failed := a[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDegraded && a[v1alpha1.DesiredImageAnnotation] == imageB
		ok := a[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDone && a[v1alpha1.CurrentImageAnnotation] == imageB &&
			a[v1alpha1.CurrentConfigAnnotation] == newCfg && !n.Spec.Unschedulable
		if !failed && !ok {
			return false
		}
	}
	return true
}

func (w *watch) failed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := 0
	for _, n := range w.state {
		if n.Annotations[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDegraded {
			c++
		}
	}
	return c
}

func (w *watch) progress() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	byState := map[string]int{}
	for _, n := range w.state {
		a := n.Annotations
		byState[a[v1alpha1.StateAnnotation]+" on "+a[v1alpha1.CurrentImageAnnotation][len(a[v1alpha1.CurrentImageAnnotation])-4:]]++
	}
	return fmt.Sprint(byState)
}

// idealTime is the rollout's time under its budgets with no overhead:
// each zone updates one node at a time, in name order, and each step
// waits for its slowest zone; a failure takes its update time as well.
func idealTime(nodes []fleetNode) time.Duration {
	sizes := []int{1, ceilPct(5, len(nodes)), ceilPct(25, len(nodes)), len(nodes)}
	var total time.Duration
	from := 0
	for _, to := range sizes {
		perZone := map[string]time.Duration{}
		for _, n := range nodes[from:to] {
			perZone[n.zone] += n.update
		}
		total += slices.Max(mapsValues(perZone))
		from = to
	}
	return total
}

func ceilPct(p, n int) int { return (p*n + 99) / 100 }

func mapsValues(m map[string]time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func parallel(b *testing.B, n int, fn func(i int) error) {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func mustJSON(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}
