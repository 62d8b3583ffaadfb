package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	strata "github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/test/testenv"
	"github.com/strata-dev/strata/test/testregistry"
)

// These tests run the build controller against a real apiserver and a
// real registry. Without a kubelet no pod runs, so each test plays the
// build pod: it pushes an image where the Job would, and writes the pod
// and Job status a kubelet and the Job controller would write. The real
// Job runs in the e2e suite.

const ns = "strata-system"

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
		return env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
}

const timeout = 30 * time.Second

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, what, check)
}

func startController(t *testing.T, reg *testregistry.Registry, history int, configure ...func(*Config)) (stop func()) {
	t.Helper()
	return env.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: CacheByObject(ns)}}, func(mgr ctrl.Manager) error {
		r := &Reconciler{
			Client:   mgr.GetClient(),
			Recorder: mgr.GetEventRecorder("strata-build"),
			Config: Config{
				Namespace:          ns,
				BuilderImage:       "127.0.0.1:5000/strata/builder@sha256:" + strings.Repeat("b", 64),
				BackoffLimit:       1,
				InsecureRegistries: []string{reg.Host},
				History:            history,
			},
		}
		for _, fn := range configure {
			fn(&r.Config)
		}
		return r.SetupWithManager(mgr)
	})
}

// fixture is one test's world: a registry with a base image, Secrets, a
// pool with a rendered config, and the MachineOSConfig's name.
type fixture struct {
	t        *testing.T
	name     string
	reg      *testregistry.Registry
	base     string
	password string
}

func newFixture(t *testing.T, name string) *fixture {
	t.Helper()
	return newFixtureOn(t, name, testregistry.Start)
}

// newFixtureOn is newFixture on the registry start starts
// (testregistry.Start or StartReferrers).
func newFixtureOn(t *testing.T, name string, start func(testing.TB, string) *testregistry.Registry) *fixture {
	t.Helper()
	f := &fixture{t: t, name: name, password: "pw-" + name}
	f.reg = start(t, f.password)
	f.base = f.push("strata/base:1")
	for _, secret := range []string{name + "-push", name + "-pull"} {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: f.reg.DockerConfigJSON(f.password)},
		}
		f.create(s)
	}
	f.create(&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: name}})
	f.setRendered("1")
	return f
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		f.t.Fatal(err)
	}
}

// push puts a random image at repo:tag and returns it by tag.
func (f *fixture) push(repoTag string) string {
	f.t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		f.t.Fatal(err)
	}
	ref, err := name.ParseReference(f.reg.Host+"/"+repoTag, name.Insecure)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(f.reg.Auth())); err != nil {
		f.t.Fatal(err)
	}
	return ref.String()
}

// setRendered points the pool at a rendered config whose content is a
// file holding version; it stands in for the render controller.
func (f *fixture) setRendered(version string) {
	f.t.Helper()
	ctx := context.Background()
	name := "rendered-" + f.name + "-v" + version
	mc := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1alpha1.GeneratedByControllerAnnotation: "test"}},
		Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
			`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/version","mode":420,"contents":{"source":"data:,` + version + `"}}]}}`)}},
	}
	if err := env.Client.Create(ctx, mc); err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatal(err)
	}
	f.pointPool(name)
}

// pointPool sets the pool's rendered configuration, as the render
// controller would, retrying when the build controller wrote the pool's
// status in between.
func (f *fixture) pointPool(rendered string) {
	f.t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pool := &v1alpha1.MachineConfigPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: f.name}, pool); err != nil {
			return err
		}
		pool.Status.Configuration.Name = rendered
		return env.Client.Status().Update(ctx, pool)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// mosc creates the fixture's MachineOSConfig. It builds with SingleJob,
// whose Job these tests play; layer_integration_test.go tests ConfigLayer.
func (f *fixture) mosc(mutate ...func(*v1alpha1.MachineOSConfig)) {
	f.t.Helper()
	m := &v1alpha1.MachineOSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: f.name},
		Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: f.name},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder, Strategy: v1alpha1.SingleJobStrategy},
			BaseImagePullSpec:       f.base,
			BaseImagePullSecret:     &v1alpha1.SecretReference{Name: f.name + "-pull"},
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: f.name + "-push"},
			RenderedImagePullSecret: &v1alpha1.SecretReference{Name: f.name + "-pull"},
			RenderedImagePushSpec:   f.reg.Host + "/strata/" + f.name + ":latest",
			ContainerFile:           []v1alpha1.MachineOSContainerfile{{ContainerfileArch: v1alpha1.ContainerfileArchNoArch, Content: "RUN echo hi > /etc/hi"}},
		},
	}
	for _, fn := range mutate {
		fn(m)
	}
	f.create(m)
	// Leave nothing for later tests' controllers to work on.
	f.t.Cleanup(func() { deleteMOSC(m.Name) })
}

// deleteMOSC deletes a MachineOSConfig and its builds without a running
// controller: it takes the finalizer off.
func deleteMOSC(name string) {
	ctx := context.Background()
	m := &v1alpha1.MachineOSConfig{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, m); err != nil {
		return
	}
	m.Finalizers = nil
	_ = env.Client.Update(ctx, m)
	_ = env.Client.Delete(ctx, m)
	_ = env.Client.DeleteAllOf(ctx, &v1alpha1.MachineOSBuild{}, client.MatchingLabels{v1alpha1.MachineOSConfigLabel: name})
}

// annotate sets an annotation on a MachineOSConfig as kubectl annotate
// would, retrying when the controller wrote it in between.
func annotate(t *testing.T, name, key string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := getMOSC(t, name)
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[key] = ""
		return env.Client.Update(context.Background(), m)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func getMOSC(t *testing.T, name string) *v1alpha1.MachineOSConfig {
	t.Helper()
	m := &v1alpha1.MachineOSConfig{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func getBuild(name string) (*v1alpha1.MachineOSBuild, error) {
	b := &v1alpha1.MachineOSBuild{}
	return b, env.Client.Get(context.Background(), client.ObjectKey{Name: name}, b)
}

// waitBuild waits for the MachineOSConfig's current build to differ from
// not and to have its Job, and returns it.
func waitBuild(t *testing.T, mosc string, not ...string) *v1alpha1.MachineOSBuild {
	t.Helper()
	var b *v1alpha1.MachineOSBuild
	eventually(t, "a build of "+mosc+" with a Job", func() error {
		var err error
		if b, err = currentBuild(t, mosc, not); err != nil {
			return err
		}
		if !machineosbuild.IsTrue(b, v1alpha1.BuildPrepared) {
			return errors.New("not Prepared")
		}
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: job.JobName(b.Name)}, &batchv1.Job{})
	})
	return b
}

// waitNewBuild waits for the MachineOSConfig's current build to differ
// from not, and returns it.
func waitNewBuild(t *testing.T, mosc string, not ...string) *v1alpha1.MachineOSBuild {
	t.Helper()
	var b *v1alpha1.MachineOSBuild
	eventually(t, "a new build of "+mosc, func() error {
		var err error
		b, err = currentBuild(t, mosc, not)
		return err
	})
	return b
}

// currentBuild is the MachineOSConfig's current build, unless it has none
// or it is one of not.
func currentBuild(t *testing.T, mosc string, not []string) (*v1alpha1.MachineOSBuild, error) {
	m := getMOSC(t, mosc)
	if m.Status.MachineOSBuild == nil {
		return nil, fmt.Errorf("no build yet (conditions %+v)", m.Status.Conditions)
	}
	if slices.Contains(not, m.Status.MachineOSBuild.Name) {
		return nil, errors.New("still build " + m.Status.MachineOSBuild.Name)
	}
	return getBuild(m.Status.MachineOSBuild.Name)
}

// finishPod plays the build pod: a pod of the Job that ended with msg.
func finishPod(t *testing.T, b *v1alpha1.MachineOSBuild, phase corev1.PodPhase, exit int32, msg string) {
	t.Helper()
	ctx := context.Background()
	labels := job.PodLabels(b.Name)
	labels[v1alpha1.MachineOSConfigLabel] = b.Spec.MachineOSConfig.Name
	j := &batchv1.Job{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.JobName(b.Name)}, j); err != nil {
		t.Fatal(err)
	}
	if j.Status.StartTime == nil {
		// The Job controller records when the Job's first pod started.
		start := metav1.NewTime(time.Now().Add(-time.Second))
		j.Status.StartTime = &start
		j.Status.Active = 1
		if err := env.Client.Status().Update(ctx, j); err != nil {
			t.Fatalf("write Job start: %v", err)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: job.JobName(b.Name) + "-", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: job.ContainerPush, Image: "builder"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
		Name:  job.ContainerPush,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg, FinishedAt: now, StartedAt: now}},
	}}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// succeed plays a build that pushed an image.
func (f *fixture) succeed(b *v1alpha1.MachineOSBuild) string {
	f.t.Helper()
	pushed := f.push(strings.TrimPrefix(b.Spec.RenderedImagePushSpec, f.reg.Host+"/"))
	ref, _ := name.ParseReference(pushed, name.Insecure)
	desc, err := remote.Head(ref, remote.WithAuth(f.reg.Auth()))
	if err != nil {
		f.t.Fatal(err)
	}
	msg, _ := json.Marshal(job.TerminationMessage{Digest: desc.Digest.String()})
	finishPod(f.t, b, corev1.PodSucceeded, 0, string(msg))
	return ref.Context().Name() + "@" + desc.Digest.String()
}

func waitCondition(t *testing.T, build, cond string) *v1alpha1.MachineOSBuild {
	t.Helper()
	var b *v1alpha1.MachineOSBuild
	eventually(t, build+" "+cond, func() error {
		var err error
		if b, err = getBuild(build); err != nil {
			return err
		}
		if !machineosbuild.IsTrue(b, cond) {
			return fmt.Errorf("conditions %+v", b.Status.Conditions)
		}
		return nil
	})
	return b
}

// jobsCreated counts the JobCreated Events about a build.
func jobsCreated(t *testing.T, build string) int {
	t.Helper()
	var events eventsv1.EventList
	if err := env.Client.List(context.Background(), &events); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.Regarding.Name == build && e.Reason == "JobCreated" {
			// Events alike are counted in a series, not repeated.
			if e.Series != nil {
				n += int(max(e.Series.Count, 1))
			} else {
				n++
			}
		}
	}
	return n
}

func jobUID(t *testing.T, build string) (string, bool) {
	t.Helper()
	j := &batchv1.Job{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: job.JobName(build)}, j)
	if apierrors.IsNotFound(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(j.UID), true
}

func TestBuildInterruptAndReuse(t *testing.T) {
	f := newFixture(t, "reuse")
	startController(t, f.reg, 0)
	succeeded := testutil.ToFloat64(strata.Builds.WithLabelValues("Succeeded"))
	interrupted := testutil.ToFloat64(strata.Builds.WithLabelValues("Interrupted"))
	testStart := time.Now()
	succeededRuns, succeededSeconds := observedDurations(t, "Succeeded")
	stagesBefore := stageObservations(t)
	interruptedRuns, _ := observedDurations(t, "Interrupted")
	f.mosc()

	a := waitBuild(t, "reuse")
	if !strings.HasPrefix(a.Name, "reuse-") || len(a.Name) != len("reuse-")+16 {
		t.Errorf("build name %q, want reuse-<16 hex>", a.Name)
	}
	if a.Spec.RenderedImagePushSpec != f.reg.Host+"/strata/reuse:"+a.Name {
		t.Errorf("push spec %q", a.Spec.RenderedImagePushSpec)
	}
	if a.Status.BaseImagePullSpec == "" || !strings.Contains(a.Status.BaseImagePullSpec, "@sha256:") {
		t.Errorf("base image %q, want it by digest", a.Status.BaseImagePullSpec)
	}
	f.assertNoSecret(a)

	imageA := f.succeed(a)
	a = waitCondition(t, a.Name, v1alpha1.BuildSucceeded)
	f.assertNoSecret(a)
	if a.Status.DigestedImagePushSpec != imageA {
		t.Errorf("digestedImagePushSpec %q, want %q", a.Status.DigestedImagePushSpec, imageA)
	}
	eventually(t, "MachineOSConfig points at image A", func() error {
		m := getMOSC(t, "reuse")
		if m.Status.CurrentImagePullSpec != imageA || !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.ConfigReady) {
			return fmt.Errorf("current %q, conditions %+v", m.Status.CurrentImagePullSpec, m.Status.Conditions)
		}
		return nil
	})
	// A's Job and Secret go once its end is written.
	eventually(t, "A's Job is deleted once A succeeded", func() error {
		if _, ok := jobUID(t, a.Name); ok {
			return errors.New("still there")
		}
		return nil
	})

	// New inputs start build B; going back before it ends interrupts B
	// and reuses A without a new Job.
	f.setRendered("2")
	b := waitBuild(t, "reuse", a.Name)
	f.setRendered("1")
	b = waitCondition(t, b.Name, v1alpha1.BuildInterrupted)
	if b.Status.BuildEnd == nil {
		t.Error("interrupted build has no end time")
	}
	eventually(t, "B's Job is deleted", func() error {
		if _, ok := jobUID(t, b.Name); ok {
			return errors.New("still there")
		}
		return nil
	})
	eventually(t, "A is current again", func() error {
		m := getMOSC(t, "reuse")
		if m.Status.MachineOSBuild.Name != a.Name || m.Status.CurrentImagePullSpec != imageA {
			return fmt.Errorf("build %s, image %s", m.Status.MachineOSBuild.Name, m.Status.CurrentImagePullSpec)
		}
		return nil
	})
	if uid, ok := jobUID(t, a.Name); ok {
		t.Errorf("reusing A made a new Job (uid %s)", uid)
	}
	var builds v1alpha1.MachineOSBuildList
	if err := env.Client.List(context.Background(), &builds, client.MatchingLabels{v1alpha1.MachineOSConfigLabel: "reuse"}); err != nil {
		t.Fatal(err)
	}
	if len(builds.Items) != 2 {
		t.Errorf("%d builds, want A and B only", len(builds.Items))
	}
	if got := testutil.ToFloat64(strata.Builds.WithLabelValues("Succeeded")) - succeeded; got != 1 {
		t.Errorf("strata_builds_total{result=Succeeded} rose by %v, want 1", got)
	}
	if got := testutil.ToFloat64(strata.Builds.WithLabelValues("Interrupted")) - interrupted; got != 1 {
		t.Errorf("strata_builds_total{result=Interrupted} rose by %v, want 1", got)
	}
	// A's duration is observed once: from its Job's start (a second
	// before finishPod) to its end, so at least that second and at most
	// the test's time. Both ends are kept to the second, as the API
	// stores times, so the end may gain up to a second more. B never
	// started, so it has none.
	runs, seconds := observedDurations(t, "Succeeded")
	if d := seconds - succeededSeconds; runs != succeededRuns+1 || d < 0.5 || d > time.Since(testStart).Seconds()+2 {
		t.Errorf("strata_build_duration_seconds{result=Succeeded} rose by %d observations of %.3fs in all, want 1 of 1s to %.1fs (build A)",
			runs-succeededRuns, d, time.Since(testStart).Seconds()+2)
	}
	if runs, _ := observedDurations(t, "Interrupted"); runs != interruptedRuns {
		t.Errorf("strata_build_duration_seconds{result=Interrupted} rose by %d observations, want none: B never started", runs-interruptedRuns)
	}
	// Each stage of A that ran is observed with its recorded duration.
	ran := 0
	for _, st := range a.Status.Stages {
		if st.Reused || st.Duration == nil {
			continue
		}
		ran++
		before := stagesBefore[string(st.Name)]
		runs, seconds := observedHistogram(t, "strata_build_stage_duration_seconds", map[string]string{"stage": string(st.Name), "result": "Succeeded"})
		// The sums are floats that other builds added to before: equal
		// to a microsecond.
		if runs != before.runs+1 || math.Abs(seconds-before.seconds-st.Duration.Seconds()) > 1e-6 {
			t.Errorf("strata_build_stage_duration_seconds{stage=%s,result=Succeeded} rose by %d observations of %.3fs, want 1 of %.3fs",
				st.Name, runs-before.runs, seconds-before.seconds, st.Duration.Seconds())
		}
	}
	if ran == 0 {
		t.Errorf("build A recorded no stage that ran: %+v", a.Status.Stages)
	}
}

type observed struct {
	runs    uint64
	seconds float64
}

// stageObservations is strata_build_stage_duration_seconds of Succeeded
// builds by stage.
func stageObservations(t *testing.T) map[string]observed {
	out := map[string]observed{}
	for _, st := range []v1alpha1.BuildStage{v1alpha1.BuildStageAdmin, v1alpha1.BuildStageConfigLayer, v1alpha1.BuildStageJob, v1alpha1.BuildStageAttach} {
		runs, seconds := observedHistogram(t, "strata_build_stage_duration_seconds", map[string]string{"stage": string(st), "result": "Succeeded"})
		out[string(st)] = observed{runs, seconds}
	}
	return out
}

// observedDurations is the count and sum of strata_build_duration_seconds
// for result, as the metrics endpoint serves them.
func observedDurations(t *testing.T, result string) (uint64, float64) {
	t.Helper()
	return observedHistogram(t, "strata_build_duration_seconds", map[string]string{"result": result})
}

// observedHistogram is the count and sum of the histogram name's series
// with labels, as the metrics endpoint serves them.
func observedHistogram(t *testing.T, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

// assertNoSecret looks for the registry password, in the clear and as the
// base64 auth string of its Secrets, where a user can read what the
// controller made of a build: the build Secret's files (the context
// unpacked), the Job, the statuses of the build, its MachineOSConfig and
// pool, and every event.
func (f *fixture) assertNoSecret(b *v1alpha1.MachineOSBuild) {
	f.t.Helper()
	ctx := context.Background()
	auth := base64.StdEncoding.EncodeToString([]byte(f.reg.User + ":" + f.password))
	if !strings.Contains(string(f.reg.DockerConfigJSON(f.password)), auth) {
		f.t.Fatalf("the registry Secrets do not hold the auth string %q", auth)
	}
	texts := map[string][]byte{}
	// A build that ended has neither Job nor Secret any more: only what
	// remains is searched.
	if cur, err := getBuild(b.Name); err == nil && machineosbuild.Terminal(cur) {
		key := client.ObjectKey{Namespace: ns, Name: job.JobName(b.Name)}
		eventually(f.t, "the Job and Secret of ended build "+b.Name+" deleted", func() error {
			if err := env.Client.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Secret: %w", err)
			}
			if err := env.Client.Get(ctx, key, &batchv1.Job{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Job: %w", err)
			}
			return nil
		})
		f.searchForSecret(auth, texts, b)
		return
	}
	inputs := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.JobName(b.Name)}, inputs); err != nil {
		f.t.Fatalf("build Secret: %v", err)
	}
	for k, v := range inputs.Data {
		texts["build Secret key "+k] = v
	}
	zr, err := gzip.NewReader(bytes.NewReader(inputs.Data[job.KeyContext]))
	if err != nil {
		f.t.Fatalf("build context: %v", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			f.t.Fatalf("build context: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			f.t.Fatal(err)
		}
		texts["build context file "+h.Name] = data
	}
	// The search sees the context as the build does.
	if !bytes.Contains(texts["build context file Containerfile"], []byte("RUN echo hi > /etc/hi")) {
		f.t.Fatalf("the unpacked build context has no Containerfile with the admin's content: %v", slices.Collect(maps.Keys(texts)))
	}
	jb := &batchv1.Job{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.JobName(b.Name)}, jb); err != nil {
		f.t.Fatal(err)
	}
	raw, err := json.Marshal(jb)
	if err != nil {
		f.t.Fatal(err)
	}
	texts["Job"] = raw
	f.searchForSecret(auth, texts, b)
}

// searchForSecret adds the build's, its MachineOSConfig's and pool's
// statuses and every event to texts, and fails if any holds auth.
func (f *fixture) searchForSecret(auth string, texts map[string][]byte, b *v1alpha1.MachineOSBuild) {
	f.t.Helper()
	ctx := context.Background()
	pool := &v1alpha1.MachineConfigPool{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: f.name}, pool); err != nil {
		f.t.Fatal(err)
	}
	build, err := getBuild(b.Name)
	if err != nil {
		f.t.Fatal(err)
	}
	for what, obj := range map[string]any{"build": build, "MachineOSConfig": getMOSC(f.t, f.name), "pool status": pool.Status} {
		raw, err := json.Marshal(obj)
		if err != nil {
			f.t.Fatal(err)
		}
		texts[what] = raw
	}
	var events eventsv1.EventList
	if err := env.Client.List(ctx, &events); err != nil {
		f.t.Fatal(err)
	}
	var coreEvents corev1.EventList
	if err := env.Client.List(ctx, &coreEvents); err != nil {
		f.t.Fatal(err)
	}
	if len(events.Items)+len(coreEvents.Items) == 0 {
		f.t.Fatal("no events to search")
	}
	for _, list := range []any{events, coreEvents} {
		raw, err := json.Marshal(list)
		if err != nil {
			f.t.Fatal(err)
		}
		texts[fmt.Sprintf("%T", list)] = raw
	}
	for where, text := range texts {
		for _, s := range []string{f.password, auth} {
			if bytes.Contains(text, []byte(s)) {
				f.t.Errorf("the %s holds the registry credentials", where)
			}
		}
	}
}

func TestFailureKeepsCurrentImageAndSaysWhy(t *testing.T) {
	f := newFixture(t, "fail")
	startController(t, f.reg, 0)
	f.mosc()
	a := waitBuild(t, "fail")
	imageA := f.succeed(a)
	waitCondition(t, a.Name, v1alpha1.BuildSucceeded)

	f.setRendered("2")
	b := waitBuild(t, "fail", a.Name)
	report, _ := json.Marshal(job.TerminationMessage{
		Step: v1alpha1.BuildStepBuild, Message: "Containerfile line 7: RUN false: exit status 1",
		LogTail: "STEP 3/4: RUN false\nError: building at STEP \"RUN false\": exit status 1",
	})
	finishPod(t, b, corev1.PodFailed, 3, string(report))
	failJob(t, b)

	b = waitCondition(t, b.Name, v1alpha1.BuildFailed)
	f.assertNoSecret(b)
	if b.Status.Failure == nil || b.Status.Failure.Step != v1alpha1.BuildStepBuild || !strings.Contains(b.Status.Failure.Message, "line 7") {
		t.Errorf("failure %+v, want step Build naming line 7", b.Status.Failure)
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildFailed); c == nil || !strings.Contains(c.Message, "line 7") || !strings.Contains(c.Message, "RUN false") {
		t.Errorf("Failed condition %+v lacks the line and the log", c)
	}
	eventually(t, "the config and the pool say why, and keep image A", func() error {
		m := getMOSC(t, "fail")
		if m.Status.CurrentImagePullSpec != imageA {
			return fmt.Errorf("current image moved to %q", m.Status.CurrentImagePullSpec)
		}
		if d := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConfigDegraded); d == nil || d.Status != metav1.ConditionTrue || !strings.Contains(d.Message, "line 7") {
			return fmt.Errorf("Degraded %+v", d)
		}
		pool := &v1alpha1.MachineConfigPool{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "fail"}, pool); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.PoolImageBuildDegraded); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "line 7") {
			return fmt.Errorf("pool ImageBuildDegraded %+v", c)
		}
		return nil
	})
}

// failJob writes what the Job controller writes when a Job gives up.
func failJob(t *testing.T, b *v1alpha1.MachineOSBuild) {
	t.Helper()
	ctx := context.Background()
	j := &batchv1.Job{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.JobName(b.Name)}, j); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	if j.Status.StartTime == nil {
		j.Status.StartTime = &now
	}
	j.Status.Active = 0
	j.Status.Failed = 1
	j.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy, LastTransitionTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy, LastTransitionTime: now},
	}
	if err := env.Client.Status().Update(ctx, j); err != nil {
		t.Fatalf("write Job status: %v", err)
	}
}

func TestRebuildAnnotation(t *testing.T) {
	f := newFixture(t, "rebuild")
	startController(t, f.reg, 0)
	f.mosc()
	a := waitBuild(t, "rebuild")
	f.succeed(a)
	a = waitCondition(t, a.Name, v1alpha1.BuildSucceeded)

	annotate(t, "rebuild", v1alpha1.RebuildAnnotation)
	eventually(t, "a new build of the same inputs", func() error {
		b, err := getBuild(a.Name)
		if err != nil {
			return err
		}
		if b.UID == a.UID {
			return errors.New("same build")
		}
		if machineosbuild.Terminal(b) {
			return errors.New("new build already terminal")
		}
		if _, ok := getMOSC(t, "rebuild").Annotations[v1alpha1.RebuildAnnotation]; ok {
			return errors.New("annotation not removed")
		}
		return nil
	})
}

// Garbage collection spares the images nodes run, are to run, or
// booted before Strata first changed them (originalImage: where a node
// returns when its pool stops being layered).
func TestHistorySparesImagesNodesUse(t *testing.T) {
	f := newFixture(t, "hist")
	startController(t, f.reg, 1)
	f.mosc()
	var builds []*v1alpha1.MachineOSBuild
	var images []string
	for v := 1; v <= 5; v++ {
		if v > 1 {
			f.setRendered(fmt.Sprint(v))
		}
		var not []string
		for _, b := range builds {
			not = append(not, b.Name)
		}
		b := waitBuild(t, "hist", not...)
		images = append(images, f.succeed(b))
		builds = append(builds, waitCondition(t, b.Name, v1alpha1.BuildSucceeded))
		var annotation string
		switch v {
		case 1:
			// A node still runs the first image.
			annotation = v1alpha1.CurrentImageAnnotation
		case 2:
			// Another booted the second before Strata changed it.
			annotation = v1alpha1.OriginalImageAnnotation
		}
		if annotation != "" {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hist-node-%d", v), Annotations: map[string]string{annotation: images[v-1]}}}
			f.create(node)
			t.Cleanup(func() {
				if err := env.Client.Delete(context.Background(), node); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("delete node %s: %v", node.Name, err)
				}
			})
		}
	}
	// Kept: the current (5), the one a node runs (1), the one a node
	// booted first (2), and one more of history (4). Build 3 goes with
	// its image.
	eventually(t, "build 3 is collected", func() error {
		if _, err := getBuild(builds[2].Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("build 3: %w", err)
		}
		return nil
	})
	for _, i := range []int{0, 1, 3, 4} {
		if _, err := getBuild(builds[i].Name); err != nil {
			t.Errorf("build %d: %v", i+1, err)
		}
	}
	ref, _ := name.ParseReference(images[2], name.Insecure)
	if _, err := remote.Head(ref, remote.WithAuth(f.reg.Auth())); err == nil {
		t.Error("the image of the collected build is still in the registry")
	}
	for i, what := range map[int]string{0: "a node runs", 1: "a node booted before Strata changed it"} {
		ref, _ = name.ParseReference(images[i], name.Insecure)
		if _, err := remote.Head(ref, remote.WithAuth(f.reg.Auth())); err != nil {
			t.Errorf("the image %s was deleted: %v", what, err)
		}
	}
}

func TestBadInputIsACondition(t *testing.T) {
	f := newFixture(t, "bad")
	startController(t, f.reg, 0)
	// A pool that another MachineOSConfig layers already.
	f.create(&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "taken"}})
	f.mosc(func(m *v1alpha1.MachineOSConfig) { m.Name, m.Spec.MachineConfigPool.Name = "taken-first", "taken" })
	cases := []struct {
		name   string
		mutate func(*v1alpha1.MachineOSConfig)
		reason string
		want   string
	}{
		{"bad-pool", func(m *v1alpha1.MachineOSConfig) { m.Spec.MachineConfigPool.Name = "no-such-pool" },
			v1alpha1.ReasonUnknownPool, `spec.machineConfigPool.name: MachineConfigPool "no-such-pool" not found`},
		{"bad-second", func(m *v1alpha1.MachineOSConfig) { m.Spec.MachineConfigPool.Name = "taken" },
			v1alpha1.ReasonPoolConflict, "spec.machineConfigPool.name: pool taken is already layered by MachineOSConfig taken-first"},
		{"bad-secret", func(m *v1alpha1.MachineOSConfig) { m.Spec.RenderedImagePushSecret.Name = "nope" },
			v1alpha1.ReasonMissingSecret, "spec.renderedImagePushSecret.name: Secret strata-system/nope not found"},
		{"bad-registry", func(m *v1alpha1.MachineOSConfig) { m.Spec.BaseImagePullSpec = "127.0.0.1:1/strata/base:1" },
			v1alpha1.ReasonBaseUnreachable, "spec.baseImagePullSpec"},
		{"bad-containerfile", func(m *v1alpha1.MachineOSConfig) {
			m.Spec.ContainerFile = []v1alpha1.MachineOSContainerfile{{ContainerfileArch: v1alpha1.ContainerfileArchNoArch, Content: "FROM scratch"}}
		}, v1alpha1.ReasonInvalidInput, "spec.containerFile[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer deleteMOSC(tc.name) // one pool, one MachineOSConfig at a time
			f.mosc(func(m *v1alpha1.MachineOSConfig) {
				m.Name = tc.name
				tc.mutate(m)
			})
			eventually(t, "Degraded names the field", func() error {
				m := getMOSC(t, tc.name)
				d := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConfigDegraded)
				if d == nil || d.Status != metav1.ConditionTrue || d.Reason != tc.reason || !strings.Contains(d.Message, tc.want) {
					return fmt.Errorf("Degraded %+v", d)
				}
				return nil
			})
			var builds v1alpha1.MachineOSBuildList
			if err := env.Client.List(context.Background(), &builds, client.MatchingLabels{v1alpha1.MachineOSConfigLabel: tc.name}); err != nil {
				t.Fatal(err)
			}
			if len(builds.Items) != 0 {
				t.Errorf("bad input made %d builds", len(builds.Items))
			}
		})
	}
}

func TestRestartAdoptsRunningJobAndDeleteCleansUp(t *testing.T) {
	f := newFixture(t, "adopt")
	stop := startController(t, f.reg, 0)
	f.mosc()
	a := waitBuild(t, "adopt")
	uid, _ := jobUID(t, a.Name)
	stop() // the controller dies mid-build

	startController(t, f.reg, 0)
	// The restarted controller adopts the Job: same build, same Job.
	imageA := f.succeed(a)
	waitCondition(t, a.Name, v1alpha1.BuildSucceeded)
	// The pod f.succeed played belongs to the Job made before the
	// restart, so the build's success is that Job's; and no second Job
	// was made for it.
	if n := jobsCreated(t, a.Name); n != 1 {
		t.Errorf("%d JobCreated Events for %s (first Job uid %s), want 1: the restarted controller made a Job again", n, a.Name, uid)
	}
	eventually(t, "current image", func() error {
		if got := getMOSC(t, "adopt").Status.CurrentImagePullSpec; got != imageA {
			return fmt.Errorf("current %q", got)
		}
		return nil
	})

	if err := env.Client.Delete(context.Background(), getMOSC(t, "adopt")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the config, its builds and Jobs are gone", func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "adopt"}, &v1alpha1.MachineOSConfig{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("MachineOSConfig: %w", err)
		}
		if _, err := getBuild(a.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("build: %w", err)
		}
		if _, ok := jobUID(t, a.Name); ok {
			return errors.New("Job still there")
		}
		return nil
	})
	pool := &v1alpha1.MachineConfigPool{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "adopt"}, pool); err != nil {
		t.Fatal(err)
	}
	if claim, ok := pool.Annotations[v1alpha1.LayeredByAnnotation]; ok {
		t.Errorf("the pool is still claimed by %q", claim)
	}
	if meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.PoolImageBuildDegraded) != nil {
		t.Error("the pool still has ImageBuildDegraded")
	}
}

// A build pod that cannot pull the builder image fails the build at once
// with the kubelet's reason, and its Job is stopped.
func TestPodThatCannotStartFailsTheBuild(t *testing.T) {
	f := newFixture(t, "nostart")
	startController(t, f.reg, 0)
	f.mosc()
	b := waitBuild(t, "nostart")
	ctx := context.Background()
	j := &batchv1.Job{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.JobName(b.Name)}, j); err != nil {
		t.Fatal(err)
	}
	labels := job.PodLabels(b.Name)
	labels[v1alpha1.MachineOSConfigLabel] = "nostart"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: j.Name + "-", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: job.ContainerPush, Image: "builder"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{
		Name: job.ContainerPull, Image: "127.0.0.1:5000/strata/builder:gone",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "manifest unknown"}},
	}}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	b = waitCondition(t, b.Name, v1alpha1.BuildFailed)
	if f := b.Status.Failure; f == nil || !strings.Contains(f.Message, "ErrImagePull") || !strings.Contains(f.Message, "builder:gone") {
		t.Errorf("failure %+v, want the kubelet's reason and the image", b.Status.Failure)
	}
	eventually(t, "the Job stopped", func() error {
		if _, ok := jobUID(t, b.Name); ok {
			return errors.New("the Job is still there")
		}
		return nil
	})
}

// A build made by a reconcile that stopped before it wrote the build's
// first status (the controller restarted between the create and the
// status write) gets that status from the next reconcile, with its
// base, and is built (found by test/convergence).
func TestBuildMadeWithoutItsStatusIsCompleted(t *testing.T) {
	f := newFixture(t, "nostatus")
	stop := startController(t, f.reg, 0)
	f.mosc()
	a := waitBuild(t, "nostatus")
	stop()
	// What the create left when no status write followed.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := getBuild(a.Name)
		if err != nil {
			return err
		}
		b.Status = v1alpha1.MachineOSBuildStatus{}
		return env.Client.Status().Update(context.Background(), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	startController(t, f.reg, 0)
	eventually(t, "the build's first status", func() error {
		b, err := getBuild(a.Name)
		if err != nil {
			return err
		}
		if !machineosbuild.IsTrue(b, v1alpha1.BuildPrepared) || !strings.Contains(b.Status.BaseImagePullSpec, "@sha256:") {
			return fmt.Errorf("base %q, conditions %+v", b.Status.BaseImagePullSpec, b.Status.Conditions)
		}
		return nil
	})
	f.succeed(a)
	b := waitCondition(t, a.Name, v1alpha1.BuildSucceeded)
	if !strings.Contains(b.Status.BaseImagePullSpec, "@sha256:") {
		t.Errorf("the succeeded build has base %q, want it by digest", b.Status.BaseImagePullSpec)
	}
}
