package convergence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/controllers/build"
	"github.com/strata-dev/strata/test/testenv"
	"github.com/strata-dev/strata/test/testregistry"
)

const ns = "strata-system"

// bound is how long the controller may take to converge once a sequence
// stops: the slowest path is a registry that came back, retried after at
// most the controller's retry delay (maxRetry here), then a Job's build
// and the configuration layer, each about a second.
const (
	maxRetry = 2 * time.Second
	bound    = 30 * time.Second
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		return env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
}

// settings are the run's size and seed, from the environment: make test
// runs a few sequences, make test-heavy at least 200.
type settings struct {
	sequences, steps int
	seed             uint64
	only             int // -1: all
}

func readSettings(t *testing.T) settings {
	s := settings{sequences: 3, steps: 12, seed: uint64(time.Now().UnixNano()), only: -1}
	num := func(key string, into *int) {
		if v := os.Getenv(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", key, v, err)
			}
			*into = n
		}
	}
	num("STRATA_CONVERGENCE_SEQUENCES", &s.sequences)
	num("STRATA_CONVERGENCE_STEPS", &s.steps)
	num("STRATA_CONVERGENCE_ONLY", &s.only)
	if v := os.Getenv("STRATA_CONVERGENCE_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("STRATA_CONVERGENCE_SEED=%q: %v", v, err)
		}
		s.seed = n
	}
	return s
}

// TestConvergence runs random sequences of changes and failures against
// one build controller and checks after each that it converged within
// bound.
func TestConvergence(t *testing.T) {
	set := readSettings(t)
	t.Logf("seed %d: replay a sequence with STRATA_CONVERGENCE_SEED=%d STRATA_CONVERGENCE_ONLY=<n>", set.seed, set.seed)
	w := newWorld(t, set.seed)
	start := time.Now()
	ran := 0
	for i := range set.sequences {
		if set.only >= 0 && i != set.only {
			continue
		}
		rng := rand.New(rand.NewPCG(set.seed, uint64(i)))
		steps := 1 + rng.IntN(set.steps)
		seq := w.newSequence(t, i, rng)
		ok := t.Run(fmt.Sprintf("sequence-%d", i), func(t *testing.T) {
			seq.t = t
			seq.run(steps)
		})
		ran++
		if !ok {
			t.Fatalf("sequence %d failed; replay: STRATA_CONVERGENCE_SEED=%d STRATA_CONVERGENCE_ONLY=%d go test ./test/convergence -run TestConvergence -v",
				i, set.seed, i)
		}
	}
	t.Logf("%d sequences of up to %d steps in %s", ran, set.steps, time.Since(start).Round(time.Millisecond))
}

// world is what every sequence shares: the registry with two bases, the
// controller (restarted by some steps) and the played kubelet.
type world struct {
	t     *testing.T
	reg   *testregistry.Registry
	bases []string // by tag
	logs  *syncBuffer

	mu   sync.Mutex
	stop func()
	down bool // the registry is stopped
}

const password = "pw-convergence"

func newWorld(t *testing.T, seed uint64) *world {
	w := &world{t: t, logs: &syncBuffer{}}
	w.reg = testregistry.Start(t, password)
	for _, tag := range []string{"strata/base:1", "strata/base:2"} {
		w.bases = append(w.bases, w.push(t, tag))
	}
	for _, secret := range []string{"conv-push", "conv-pull"} {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: w.reg.DockerConfigJSON(password)},
		}
		if err := env.Client.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	// The kubelet and Job controller, played; they do not restart with
	// Strata's controller.
	env.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: build.CacheByObject(ns)}}, func(mgr ctrl.Manager) error {
		return ctrl.NewControllerManagedBy(mgr).Named("kubelet").For(&batchv1.Job{}).
			Complete(&kubelet{client: mgr.GetClient(), world: w, rng: rand.New(rand.NewPCG(seed, 0)), pods: map[types.UID]*playedPod{}})
	})
	w.startController()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller log (last 64 KiB):\n%s", w.logs.Tail(64<<10))
		}
	})
	return w
}

func (w *world) startController() {
	w.mu.Lock()
	defer w.mu.Unlock()
	logger := zap.New(zap.WriteTo(w.logs), zap.UseDevMode(true))
	w.stop = env.StartManager(w.t, ctrl.Options{Logger: logger, Cache: cache.Options{ByObject: build.CacheByObject(ns)}}, func(mgr ctrl.Manager) error {
		r := &build.Reconciler{
			Client:   mgr.GetClient(),
			Recorder: mgr.GetEventRecorder("strata-build"),
			Config: build.Config{
				Namespace:          ns,
				BuilderImage:       "127.0.0.1:5000/strata/builder@sha256:" + strings.Repeat("b", 64),
				BackoffLimit:       1,
				InsecureRegistries: []string{w.reg.Host},
				History:            2,
				MaxRetryDelay:      metav1.Duration{Duration: maxRetry},
			},
		}
		return r.SetupWithManager(mgr)
	})
}

func (w *world) restartController() {
	w.mu.Lock()
	stop := w.stop
	w.mu.Unlock()
	stop()
	w.startController()
}

func (w *world) registryDown() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.down {
		w.reg.Stop(w.t)
		w.down = true
	}
}

func (w *world) registryUp() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down {
		w.reg.Restart(w.t)
		w.down = false
	}
}

// push puts a random image at repo:tag and returns it by tag.
func (w *world) push(t testing.TB, repoTag string) string {
	t.Helper()
	ref, err := name.ParseReference(w.reg.Host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.pushTo(ref); err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

func (w *world) pushTo(ref name.Reference) (string, error) {
	img, err := random.Image(256, 1)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithAuth(w.reg.Auth())); err != nil {
		return "", err
	}
	d, err := img.Digest()
	return d.String(), err
}

// kubelet plays a build Job's pod: it starts it at once, lets it run for
// a random time (as long as a short real build, so that later changes
// find builds running), then pushes a random image where the Job was told
// to and reports its digest, as the push container does. While the
// registry is down, the push waits, as a real push would retry.
type kubelet struct {
	client client.Client
	world  *world

	mu   sync.Mutex
	rng  *rand.Rand
	pods map[types.UID]*playedPod
}

type playedPod struct {
	name string
	done time.Time
}

func (k *kubelet) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	j := &batchv1.Job{}
	if err := k.client.Get(ctx, req.NamespacedName, j); err != nil || !j.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var pushSpec string
	for _, c := range j.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "STRATA_PUSH_SPEC" {
				pushSpec = e.Value
			}
		}
	}
	if pushSpec == "" {
		return reconcile.Result{}, nil
	}
	k.mu.Lock()
	played := k.pods[j.UID]
	k.mu.Unlock()
	if played == nil {
		return k.start(ctx, j)
	}
	if played.name == "" {
		return reconcile.Result{}, nil // finished
	}
	if wait := time.Until(played.done); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	ref, err := name.ParseReference(pushSpec, name.Insecure)
	if err != nil {
		return reconcile.Result{}, err
	}
	digest, err := k.world.pushTo(ref)
	if err != nil {
		return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	pod := &corev1.Pod{}
	if err := k.client.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: played.name}, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	now := metav1.Now()
	msg, _ := json.Marshal(job.TerminationMessage{Digest: digest})
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name:  job.ContainerPush,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: string(msg), FinishedAt: now, StartedAt: now}},
	}}}
	if err := k.client.Status().Update(ctx, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	k.mu.Lock()
	played.name = ""
	k.mu.Unlock()
	return reconcile.Result{}, nil
}

// start runs the Job's pod, as the Job controller and a kubelet would.
func (k *kubelet) start(ctx context.Context, j *batchv1.Job) (reconcile.Result, error) {
	now := metav1.Now()
	j.Status.StartTime, j.Status.Active = &now, 1
	if err := k.client.Status().Update(ctx, j); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, GenerateName: j.Name + "-", Labels: j.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: job.ContainerPush, Image: "builder"}}},
	}
	if err := k.client.Create(ctx, pod); err != nil {
		return reconcile.Result{}, err
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now}
	if err := k.client.Status().Update(ctx, pod); err != nil {
		return reconcile.Result{}, err
	}
	k.mu.Lock()
	d := time.Duration(200+k.rng.IntN(1800)) * time.Millisecond
	k.pods[j.UID] = &playedPod{name: pod.Name, done: time.Now().Add(d)}
	k.mu.Unlock()
	return reconcile.Result{RequeueAfter: d}, nil
}

// sequence is one random run of steps on a pool of its own.
type sequence struct {
	t     *testing.T
	w     *world
	rng   *rand.Rand
	index int
	name  string // pool and MachineOSConfig
	log   []string

	// The current inputs, as the steps left them.
	version  int    // of the rendered config
	base     int    // index into w.bases
	strategy string // "" (ConfigLayer) or SingleJob
	content  string // containerFile content, "" for none
	exists   bool   // the MachineOSConfig
}

func (w *world) newSequence(t *testing.T, i int, rng *rand.Rand) *sequence {
	s := &sequence{t: t, w: w, rng: rng, index: i, name: fmt.Sprintf("conv-%d", i), version: 1}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: s.name}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// steps are what an admin, a GitOps tool or a failure does, by weight.
var steps = []struct {
	name   string
	weight int
	do     func(s *sequence)
}{
	{"edit MachineConfig", 6, func(s *sequence) { s.setRendered(1 + s.rng.IntN(3)) }},
	{"delete and recreate MachineOSConfig", 2, func(s *sequence) { s.deleteMOSC(); s.createMOSC() }},
	{"delete MachineOSConfig", 1, func(s *sequence) { s.deleteMOSC() }},
	{"create MachineOSConfig", 2, func(s *sequence) { s.createMOSC() }},
	{"change containerFile", 2, func(s *sequence) {
		s.content = []string{"", "RUN echo a > /etc/a", "RUN echo b > /etc/b"}[s.rng.IntN(3)]
		s.updateMOSC()
	}},
	{"change base", 1, func(s *sequence) { s.base = s.rng.IntN(len(s.w.bases)); s.updateMOSC() }},
	{"change strategy", 1, func(s *sequence) {
		s.strategy = []string{"", string(v1alpha1.SingleJobStrategy)}[s.rng.IntN(2)]
		s.updateMOSC()
	}},
	{"rebuild annotation", 1, func(s *sequence) { s.annotate(v1alpha1.RebuildAnnotation) }},
	{"delete the current build's Job", 1, func(s *sequence) { s.deleteJob() }},
	{"restart the controller", 1, func(s *sequence) { s.w.restartController() }},
	{"registry down", 1, func(s *sequence) { s.w.registryDown() }},
	{"registry up", 1, func(s *sequence) { s.w.registryUp() }},
}

func (s *sequence) pick() int {
	total := 0
	for _, st := range steps {
		total += st.weight
	}
	n := s.rng.IntN(total)
	for i, st := range steps {
		if n < st.weight {
			return i
		}
		n -= st.weight
	}
	return 0
}

func (s *sequence) run(n int) {
	// Half the sequences start on SingleJob, whose every build runs a
	// Job that later steps can interrupt; the others on ConfigLayer,
	// maybe with an admin stage.
	s.strategy = []string{"", string(v1alpha1.SingleJobStrategy)}[s.rng.IntN(2)]
	s.content = []string{"", "RUN echo a > /etc/a"}[s.rng.IntN(2)]
	s.setRendered(1)
	s.createMOSC()
	for range n {
		st := steps[s.pick()]
		// The gap between two steps of an admin or a tool: part of the
		// scenario (it decides which steps overlap a reconcile), not a
		// wait for anything.
		gap := time.Duration(s.rng.IntN(400)) * time.Millisecond
		s.log = append(s.log, fmt.Sprintf("%s after %s", st.name, gap))
		time.Sleep(gap)
		st.do(s)
	}
	// A sequence ends with what converging needs: a MachineOSConfig and a
	// registry.
	s.w.registryUp()
	if !s.exists {
		s.createMOSC()
	}
	s.t.Logf("steps: %s", strings.Join(s.log, "; "))
	s.checkConverged()
	s.cleanup()
}

func (s *sequence) rendered(v int) string { return fmt.Sprintf("rendered-%s-v%d", s.name, v) }

// setRendered points the pool at a rendered config holding version v, as
// the render controller does after a MachineConfig edit; v may be one the
// pool had before (an edit reverted).
func (s *sequence) setRendered(v int) {
	ctx := context.Background()
	mc := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: s.rendered(v), Annotations: map[string]string{v1alpha1.GeneratedByControllerAnnotation: "test"}},
		Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
			`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/version","mode":420,"contents":{"source":"data:,` + strconv.Itoa(v) + `"}}]}}`)}},
	}
	if err := env.Client.Create(ctx, mc); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
	s.retry("point the pool at "+mc.Name, func() error {
		pool := &v1alpha1.MachineConfigPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name}, pool); err != nil {
			return err
		}
		pool.Status.Configuration.Name = mc.Name
		return env.Client.Status().Update(ctx, pool)
	})
	s.version = v
}

func (s *sequence) retry(what string, fn func() error) {
	if err := retry.RetryOnConflict(retry.DefaultRetry, fn); err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
}

func (s *sequence) spec() v1alpha1.MachineOSConfigSpec {
	spec := v1alpha1.MachineOSConfigSpec{
		MachineConfigPool:       v1alpha1.LocalObjectReference{Name: s.name},
		ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder, Strategy: v1alpha1.BuildStrategy(s.strategy)},
		BaseImagePullSpec:       s.w.bases[s.base],
		BaseImagePullSecret:     &v1alpha1.SecretReference{Name: "conv-pull"},
		RenderedImagePushSecret: v1alpha1.SecretReference{Name: "conv-push"},
		RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "conv-pull"},
		RenderedImagePushSpec:   s.w.reg.Host + "/strata/" + s.name + ":latest",
	}
	if s.content != "" {
		spec.ContainerFile = []v1alpha1.MachineOSContainerfile{{ContainerfileArch: v1alpha1.ContainerfileArchNoArch, Content: s.content}}
	}
	return spec
}

// createMOSC applies the MachineOSConfig, as kubectl apply would right
// after a delete: while the old one is still being finalized the create
// is refused, and the tool tries again.
func (s *sequence) createMOSC() {
	ctx := context.Background()
	deadline := time.Now().Add(bound)
	for {
		m := &v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: s.name}, Spec: s.spec()}
		err := env.Client.Create(ctx, m)
		if err == nil {
			s.exists = true
			return
		}
		if !apierrors.IsAlreadyExists(err) {
			s.t.Fatalf("create MachineOSConfig %s: %v", s.name, err)
		}
		old := &v1alpha1.MachineOSConfig{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name}, old); err == nil && old.DeletionTimestamp.IsZero() {
			s.exists = true
			s.updateMOSC()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("MachineOSConfig %s still being deleted after %s", s.name, bound)
		}
		time.Sleep(50 * time.Millisecond) // poll interval of a tool's retry
	}
}

func (s *sequence) deleteMOSC() {
	m := &v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: s.name}}
	if err := env.Client.Delete(context.Background(), m); err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatal(err)
	}
	s.exists = false
}

func (s *sequence) updateMOSC() {
	if !s.exists {
		return
	}
	ctx := context.Background()
	s.retry("update MachineOSConfig "+s.name, func() error {
		m := &v1alpha1.MachineOSConfig{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name}, m); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		if !m.DeletionTimestamp.IsZero() {
			return nil
		}
		m.Spec = s.spec()
		return env.Client.Update(ctx, m)
	})
}

func (s *sequence) annotate(key string) {
	if !s.exists {
		return
	}
	ctx := context.Background()
	s.retry("annotate MachineOSConfig "+s.name, func() error {
		m := &v1alpha1.MachineOSConfig{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name}, m); err != nil {
			return client.IgnoreNotFound(err)
		}
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[key] = ""
		return env.Client.Update(ctx, m)
	})
}

// deleteJob deletes the Job of the MachineOSConfig's current build, as
// someone cleaning up by hand would.
func (s *sequence) deleteJob() {
	m := &v1alpha1.MachineOSConfig{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: s.name}, m); err != nil || m.Status.MachineOSBuild == nil {
		return
	}
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.JobName(m.Status.MachineOSBuild.Name)}}
	_ = client.IgnoreNotFound(env.Client.Delete(context.Background(), j, client.PropagationPolicy(metav1.DeletePropagationBackground)))
}

// checkConverged waits, within bound, for the state every sequence must
// end in, and fails with what differs.
func (s *sequence) checkConverged() {
	s.t.Helper()
	deadline := time.Now().Add(bound)
	var err error
	for {
		if err = s.converged(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // poll interval, not synchronisation
	}
	s.t.Fatalf("not converged within %s: %v\n%s", bound, err, s.describe())
}

func (s *sequence) converged() error {
	ctx := context.Background()
	m := &v1alpha1.MachineOSConfig{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name}, m); err != nil {
		return err
	}
	if m.Status.ObservedGeneration != m.Generation {
		return fmt.Errorf("MachineOSConfig observed generation %d of %d", m.Status.ObservedGeneration, m.Generation)
	}
	var builds v1alpha1.MachineOSBuildList
	if err := env.Client.List(ctx, &builds, client.MatchingLabels{v1alpha1.MachineOSConfigLabel: s.name}); err != nil {
		return err
	}
	byName := map[string]*v1alpha1.MachineOSBuild{}
	running := 0
	for i := range builds.Items {
		b := &builds.Items[i]
		byName[b.Name] = b
		if !terminal(b) {
			running++
		}
	}
	if running > 1 {
		return fmt.Errorf("%d builds are not terminal", running)
	}
	if ready := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConfigReady); ready != nil {
		for n, b := range byName {
			if terminal(b) && strings.Contains(ready.Message, "Build "+n+" is running") {
				return fmt.Errorf("MachineOSConfig says %q of a terminal build", ready.Message)
			}
		}
	}
	if m.Status.MachineOSBuild == nil {
		return errors.New("MachineOSConfig names no build")
	}
	b := byName[m.Status.MachineOSBuild.Name]
	if b == nil {
		return fmt.Errorf("MachineOSConfig names build %s, which does not exist", m.Status.MachineOSBuild.Name)
	}
	if !isTrue(b, v1alpha1.BuildSucceeded) {
		return fmt.Errorf("build %s is not Succeeded: %s", b.Name, conditions(b))
	}
	if want := s.rendered(s.version); b.Spec.MachineConfig.Name != want {
		return fmt.Errorf("build %s is of %s, the pool is on %s", b.Name, b.Spec.MachineConfig.Name, want)
	}
	if base := m.Status.BaseImage; base == nil || base.PullSpec != s.w.bases[s.base] || b.Status.BaseImagePullSpec != base.DigestedPullSpec {
		return fmt.Errorf("build %s is on base %s, the MachineOSConfig's is %s (pinned %+v)", b.Name, b.Status.BaseImagePullSpec, s.w.bases[s.base], base)
	}
	wantStrategy := v1alpha1.ConfigLayerStrategy
	if s.strategy != "" {
		wantStrategy = v1alpha1.BuildStrategy(s.strategy)
	}
	if b.Status.Strategy != wantStrategy {
		return fmt.Errorf("build %s ran %s, want %s", b.Name, b.Status.Strategy, wantStrategy)
	}
	if m.Status.CurrentImagePullSpec != b.Status.DigestedImagePushSpec {
		return fmt.Errorf("current image %s, build %s pushed %s", m.Status.CurrentImagePullSpec, b.Name, b.Status.DigestedImagePushSpec)
	}
	// Nothing is left of a build that ended: no Job, no Secret.
	var jobs batchv1.JobList
	if err := env.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.MachineOSConfigLabel: s.name}); err != nil {
		return err
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp.IsZero() {
			return fmt.Errorf("Job %s is left after its build ended", j.Name)
		}
	}
	var secrets corev1.SecretList
	if err := env.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{v1alpha1.MachineOSConfigLabel: s.name}); err != nil {
		return err
	}
	if len(secrets.Items) > 0 {
		return fmt.Errorf("Secret %s is left after its build ended", secrets.Items[0].Name)
	}
	return nil
}

func (s *sequence) describe() string {
	ctx := context.Background()
	var out strings.Builder
	m := &v1alpha1.MachineOSConfig{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name}, m); err == nil {
		fmt.Fprintf(&out, "MachineOSConfig %s gen %d observed %d build %v current %s\n", m.Name, m.Generation, m.Status.ObservedGeneration, m.Status.MachineOSBuild, m.Status.CurrentImagePullSpec)
		for _, c := range m.Status.Conditions {
			fmt.Fprintf(&out, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	var builds v1alpha1.MachineOSBuildList
	_ = env.Client.List(ctx, &builds, client.MatchingLabels{v1alpha1.MachineOSConfigLabel: s.name})
	for i := range builds.Items {
		b := &builds.Items[i]
		fmt.Fprintf(&out, "build %s of %s strategy %s: %s\n", b.Name, b.Spec.MachineConfig.Name, b.Status.Strategy, conditions(b))
	}
	fmt.Fprintf(&out, "steps: %s\n", strings.Join(s.log, "; "))
	return out.String()
}

// cleanup deletes the sequence's objects through the controller, so that
// the next sequence starts on a quiet controller.
func (s *sequence) cleanup() {
	s.deleteMOSC()
	testenv.Eventually(s.t, bound, "MachineOSConfig "+s.name+" deleted", func() error {
		err := env.Client.Get(context.Background(), client.ObjectKey{Name: s.name}, &v1alpha1.MachineOSConfig{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not read: %w", err)
		}
		return errors.New("still there")
	})
}

func terminal(b *v1alpha1.MachineOSBuild) bool {
	return isTrue(b, v1alpha1.BuildSucceeded) || isTrue(b, v1alpha1.BuildFailed) || isTrue(b, v1alpha1.BuildInterrupted)
}

func isTrue(b *v1alpha1.MachineOSBuild, t string) bool {
	return meta.IsStatusConditionTrue(b.Status.Conditions, t)
}

func conditions(b *v1alpha1.MachineOSBuild) string {
	var parts []string
	for _, c := range b.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			parts = append(parts, c.Type+" ("+c.Message+")")
		}
	}
	return strings.Join(parts, ", ")
}

// syncBuffer is a bytes.Buffer many goroutines write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	return s[max(0, len(s)-n):]
}
