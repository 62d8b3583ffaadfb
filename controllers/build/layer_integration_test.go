package build

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/test/testenv"
)

// configLayer makes the fixture's MachineOSConfig build with the default
// strategy.
func configLayer(m *v1alpha1.MachineOSConfig) { m.Spec.ImageBuilder.Strategy = "" }

// noContainerfile leaves the admin stage empty: it is the base itself.
func noContainerfile(m *v1alpha1.MachineOSConfig) { m.Spec.ContainerFile = nil }

// topLayerFile reads one file of an image's top layer.
func (f *fixture) topLayerFile(image, path string) string {
	f.t.Helper()
	layers, err := f.image(image).Layers()
	if err != nil {
		f.t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		f.t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			f.t.Fatalf("%s not in the top layer of %s: %v", path, image, err)
		}
		if h.Name == strings.TrimPrefix(path, "/") {
			b, err := io.ReadAll(tr)
			if err != nil {
				f.t.Fatal(err)
			}
			return string(b)
		}
	}
}

// image reads an image of the fixture's registry (its manifest and
// config; layers when asked).
func (f *fixture) image(image string) v1.Image {
	f.t.Helper()
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		f.t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithAuth(f.reg.Auth()))
	if err != nil {
		f.t.Fatal(err)
	}
	return img
}

func (f *fixture) layers(image string) []v1.Hash {
	f.t.Helper()
	m, err := f.image(image).Manifest()
	if err != nil {
		f.t.Fatal(err)
	}
	var out []v1.Hash
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out
}

// checkAnnotations reads a build's image manifest from the registry: it
// names the base as the OCI image spec says, by digest, and carries the
// labels scanners and registries show.
func (f *fixture) checkAnnotations(b *v1alpha1.MachineOSBuild) {
	f.t.Helper()
	img := f.image(b.Status.DigestedImagePushSpec)
	m, err := img.Manifest()
	if err != nil {
		f.t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		f.t.Fatal(err)
	}
	base := b.Status.BaseImagePullSpec
	_, baseDigest, _ := strings.Cut(base, "@")
	want := map[string]string{
		containerfile.AnnotationBaseName:   base,
		containerfile.AnnotationBaseDigest: baseDigest,
		containerfile.LabelPool:            b.Labels[v1alpha1.PoolLabel],
		containerfile.LabelRenderedConfig:  b.Spec.MachineConfig.Name,
		containerfile.LabelInputHash:       cf.Config.Labels[containerfile.LabelInputHash],
	}
	for k, v := range want {
		if v == "" || m.Annotations[k] != v {
			f.t.Errorf("manifest annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}
}

// Without Containerfile content the admin stage is the base: a build, and
// a configuration change, run no Job at all.
func TestConfigLayerOnTheBase(t *testing.T) {
	f := newFixture(t, "layer-base")
	startController(t, f.reg, 0)
	f.mosc(configLayer, noContainerfile)

	a := waitCondition(t, waitNewBuild(t, "layer-base").Name, v1alpha1.BuildSucceeded)
	if a.Status.Strategy != v1alpha1.ConfigLayerStrategy {
		t.Errorf("strategy %q, want ConfigLayer", a.Status.Strategy)
	}
	if _, ok := jobUID(t, a.Name); ok {
		t.Error("a Job ran for a configuration-only build on the base")
	}
	admin := machineosbuild.FindStage(a, v1alpha1.BuildStageAdmin)
	if admin == nil || !admin.Reused || admin.Image != a.Status.BaseImagePullSpec {
		t.Fatalf("admin stage %+v, want the base, reused", admin)
	}
	if layer := machineosbuild.FindStage(a, v1alpha1.BuildStageConfigLayer); layer == nil || layer.Image != a.Status.DigestedImagePushSpec || layer.Duration == nil {
		t.Errorf("config layer stage %+v, want the image %s and a duration", layer, a.Status.DigestedImagePushSpec)
	}
	if got := f.topLayerFile(a.Status.DigestedImagePushSpec, "/etc/version"); got != "1" {
		t.Errorf("/etc/version = %q, want 1", got)
	}
	f.checkAnnotations(a)

	f.setRendered("2")
	b := waitCondition(t, waitNewBuild(t, "layer-base", a.Name).Name, v1alpha1.BuildSucceeded)
	if got := f.topLayerFile(b.Status.DigestedImagePushSpec, "/etc/version"); got != "2" {
		t.Errorf("/etc/version = %q after the change, want 2", got)
	}
	la, lb := f.layers(a.Status.DigestedImagePushSpec), f.layers(b.Status.DigestedImagePushSpec)
	if len(la) != len(lb) || la[0] != lb[0] || la[len(la)-1] == lb[len(lb)-1] {
		t.Errorf("layers %v then %v: want the base's shared and only the top one new", la, lb)
	}
	cfg := func(image string) *v1.ConfigFile {
		c, err := f.image(image).ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if got := cfg(b.Status.DigestedImagePushSpec).Config.Labels[containerfile.LabelRenderedConfig]; got != "rendered-layer-base-v2" {
		t.Errorf("rendered-config label %q", got)
	}
}

// playAdminJob plays the admin stage's Job: it pushes an image where the
// Job was told to and reports its digest.
func (f *fixture) playAdminJob(b *v1alpha1.MachineOSBuild) string {
	f.t.Helper()
	pushed := f.push(strings.TrimPrefix(f.adminPushSpec(b), f.reg.Host+"/"))
	ref, _ := name.ParseReference(pushed, name.Insecure)
	desc, err := remote.Head(ref, remote.WithAuth(f.reg.Auth()))
	if err != nil {
		f.t.Fatal(err)
	}
	msg, _ := json.Marshal(job.TerminationMessage{Digest: desc.Digest.String()})
	finishPod(f.t, b, corev1.PodSucceeded, 0, string(msg))
	return ref.Context().Name() + "@" + desc.Digest.String()
}

// adminPushSpec waits for the admin stage Job of a build and returns
// where it is told to push: the admin stage's tag.
func (f *fixture) adminPushSpec(b *v1alpha1.MachineOSBuild) string {
	f.t.Helper()
	j := &batchv1.Job{}
	eventually(f.t, "the admin stage Job of "+b.Name, func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: job.JobName(b.Name)}, j)
	})
	var spec string
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "STRATA_PUSH_SPEC" {
			spec = e.Value
		}
	}
	if !strings.Contains(spec, ":admin-") {
		f.t.Fatalf("the admin Job pushes to %q, want an admin- tag", spec)
	}
	return spec
}

// With Containerfile content, the admin stage is built once by a Job and
// reused by the next configuration change, which runs no Job.
func TestConfigLayerAdminStageBuiltOnce(t *testing.T) {
	f := newFixture(t, "layer-admin")
	startController(t, f.reg, 0)
	f.mosc(configLayer)

	a := waitNewBuild(t, "layer-admin")
	adminImage := f.playAdminJob(a)
	a = waitCondition(t, a.Name, v1alpha1.BuildSucceeded)
	if st := machineosbuild.FindStage(a, v1alpha1.BuildStageAdmin); st == nil || st.Image != adminImage || st.Reused || st.Duration == nil {
		t.Errorf("admin stage %+v, want %s built by the Job", st, adminImage)
	}
	if la := f.layers(a.Status.DigestedImagePushSpec); len(la) != len(f.layers(adminImage))+1 {
		t.Errorf("image has %d layers, want the admin stage's plus one", len(la))
	}

	f.setRendered("2")
	b := waitCondition(t, waitNewBuild(t, "layer-admin", a.Name).Name, v1alpha1.BuildSucceeded)
	if _, ok := jobUID(t, b.Name); ok {
		t.Error("a configuration change ran a Job; the admin stage should be reused")
	}
	if st := machineosbuild.FindStage(b, v1alpha1.BuildStageAdmin); st == nil || st.Image != adminImage || !st.Reused {
		t.Errorf("admin stage %+v, want %s reused", st, adminImage)
	}
}

// A failed admin stage names the stage; a configuration that needs a RUN
// step of its own runs as one Job and says why.
func TestConfigLayerFailuresAndFallback(t *testing.T) {
	f := newFixture(t, "layer-fail")
	startController(t, f.reg, 0)
	f.mosc(configLayer)

	a := waitNewBuild(t, "layer-fail")
	eventually(t, "the admin Job", func() error {
		_, ok := jobUID(t, a.Name)
		if !ok {
			return errors.New("no Job")
		}
		return nil
	})
	report, _ := json.Marshal(job.TerminationMessage{Step: v1alpha1.BuildStepBuild, Message: "Containerfile line 2: RUN echo hi: exit status 1"})
	finishPod(t, a, corev1.PodFailed, job.ExitCodePermanent, string(report))
	failJob(t, a)
	a = waitCondition(t, a.Name, v1alpha1.BuildFailed)
	if fl := a.Status.Failure; fl == nil || fl.Stage != v1alpha1.BuildStageAdmin || fl.Step != v1alpha1.BuildStepBuild {
		t.Errorf("failure %+v, want stage AdminStage, step Build", fl)
	}
	if !strings.Contains(machineosbuild.FailureMessage(a.Status.Failure), "AdminStage stage: Build failed") {
		t.Errorf("failure message %q does not name the stage", machineosbuild.FailureMessage(a.Status.Failure))
	}

	// An append to a base file takes a RUN step of the configuration's.
	mc := &v1alpha1.MachineConfig{}
	mc.Name = "rendered-layer-fail-append"
	mc.Annotations = map[string]string{v1alpha1.GeneratedByControllerAnnotation: "test"}
	mc.Spec.Config = runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/motd","append":[{"source":"data:,x"}]}]}}`)}
	f.create(mc)
	f.pointPool(mc.Name)
	b := waitNewBuild(t, "layer-fail", a.Name)
	eventually(t, "the fallback to one Job", func() error {
		var err error
		if b, err = getBuild(b.Name); err != nil {
			return err
		}
		if b.Status.Strategy != v1alpha1.SingleJobStrategy || !strings.Contains(b.Status.StrategyReason, "appends to /etc/motd") {
			return fmt.Errorf("strategy %q (%q)", b.Status.Strategy, b.Status.StrategyReason)
		}
		if _, ok := jobUID(t, b.Name); !ok {
			return errors.New("no Job")
		}
		return nil
	})
}

// reconciles counts a controller's finished reconciles in this process
// (every test's controller): "build", the MachineOSConfig reconciler, or
// machineosbuild.ControllerName.
func reconciles(t *testing.T, controller string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, fam := range families {
		if fam.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// The base is pinned: a moved tag starts a build only when the interval
// is up or the resolve-base annotation asks, never on an unrelated event.
func TestBasePinnedUntilResolvedAgain(t *testing.T) {
	f := newFixture(t, "pin")
	startController(t, f.reg, 0)
	f.mosc(configLayer, noContainerfile)
	a := waitCondition(t, waitNewBuild(t, "pin").Name, v1alpha1.BuildSucceeded)
	pinned := getMOSC(t, "pin").Status.BaseImage
	if pinned == nil || pinned.PullSpec != f.base || pinned.DigestedPullSpec != a.Status.BaseImagePullSpec {
		t.Fatalf("status.baseImage %+v, want %s pinned to %s", pinned, f.base, a.Status.BaseImagePullSpec)
	}

	f.push("strata/base:1") // the tag moves
	before := reconciles(t, "build")
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pin-pull"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Labels = map[string]string{"touched": "yes"}
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a reconcile after the Secret change", func() error {
		if reconciles(t, "build") <= before {
			return errors.New("no reconcile yet")
		}
		return nil
	})
	if m := getMOSC(t, "pin"); m.Status.MachineOSBuild.Name != a.Name || m.Status.BaseImage.DigestedPullSpec != pinned.DigestedPullSpec {
		t.Fatalf("an unrelated event moved the build to %s on %s", m.Status.MachineOSBuild.Name, m.Status.BaseImage.DigestedPullSpec)
	}

	annotate(t, "pin", v1alpha1.ResolveBaseAnnotation)
	b := waitCondition(t, waitNewBuild(t, "pin", a.Name).Name, v1alpha1.BuildSucceeded)
	if b.Status.BaseImagePullSpec == a.Status.BaseImagePullSpec {
		t.Errorf("the new build is on the old base %s", b.Status.BaseImagePullSpec)
	}
	eventually(t, "the annotation taken off and the new pin recorded", func() error {
		m := getMOSC(t, "pin")
		if _, ok := m.Annotations[v1alpha1.ResolveBaseAnnotation]; ok {
			return errors.New("annotation still there")
		}
		if m.Status.BaseImage.DigestedPullSpec != b.Status.BaseImagePullSpec {
			return fmt.Errorf("pinned %s", m.Status.BaseImage.DigestedPullSpec)
		}
		return nil
	})
	eventually(t, "an Event saying the base moved", func() error {
		var events eventsv1.EventList
		if err := env.Client.List(ctx, &events); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "pin" && e.Reason == "BaseImageUpdated" &&
				strings.Contains(e.Note, a.Status.BaseImagePullSpec) && strings.Contains(e.Note, b.Status.BaseImagePullSpec) {
				return nil
			}
		}
		return errors.New("no BaseImageUpdated event from A to B")
	})
}

// On the interval, a moved tag is followed without being asked.
func TestBaseResolvedOnInterval(t *testing.T) {
	f := newFixture(t, "follow")
	startController(t, f.reg, 0, func(c *Config) { c.BaseResolveInterval.Duration = 2 * time.Second })
	f.mosc(configLayer, noContainerfile)
	a := waitCondition(t, waitNewBuild(t, "follow").Name, v1alpha1.BuildSucceeded)
	f.push("strata/base:1")
	b := waitCondition(t, waitNewBuild(t, "follow", a.Name).Name, v1alpha1.BuildSucceeded)
	if b.Status.BaseImagePullSpec == a.Status.BaseImagePullSpec {
		t.Errorf("the new build is on the old base %s", b.Status.BaseImagePullSpec)
	}
}

// A MachineOSConfig moved to another pool releases the old one: its claim
// and its ImageBuildDegraded condition go.
func TestMovedConfigReleasesOldPool(t *testing.T) {
	f := newFixture(t, "move-a")
	newFixture(t, "move-b") // the second pool, with a rendered config
	startController(t, f.reg, 0)
	f.mosc(configLayer, noContainerfile)
	waitCondition(t, waitNewBuild(t, "move-a").Name, v1alpha1.BuildSucceeded)
	pool := func(name string) *v1alpha1.MachineConfigPool {
		p := &v1alpha1.MachineConfigPool{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got := pool("move-a").Annotations[v1alpha1.LayeredByAnnotation]; got != "move-a" {
		t.Fatalf("pool move-a layered by %q", got)
	}

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := getMOSC(t, "move-a")
		m.Spec.MachineConfigPool.Name = "move-b"
		return env.Client.Update(context.Background(), m)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the old pool released and the new one claimed", func() error {
		a, b := pool("move-a"), pool("move-b")
		if got := a.Annotations[v1alpha1.LayeredByAnnotation]; got != "" {
			return fmt.Errorf("move-a still layered by %q", got)
		}
		if meta.FindStatusCondition(a.Status.Conditions, v1alpha1.PoolImageBuildDegraded) != nil {
			return errors.New("move-a still has ImageBuildDegraded")
		}
		if got := b.Annotations[v1alpha1.LayeredByAnnotation]; got != "move-a" {
			return fmt.Errorf("move-b layered by %q", got)
		}
		return nil
	})
}

// An operator reading the controller's log sees a build made and finished,
// and the moment the inputs stop being buildable.
func TestLogsTransitions(t *testing.T) {
	f := newFixture(t, "logs")
	logs := testenv.NewLogs(1)
	env.StartManager(t, ctrl.Options{Logger: logs.Logger(), Cache: cache.Options{ByObject: CacheByObject(ns)}}, func(mgr ctrl.Manager) error {
		return (&Reconciler{
			Client:   mgr.GetClient(),
			Recorder: mgr.GetEventRecorder("strata-build"),
			Config:   Config{Namespace: ns, BuilderImage: "127.0.0.1:5000/strata/builder:latest", InsecureRegistries: []string{f.reg.Host}},
		}).SetupWithManager(mgr)
	})
	f.mosc(configLayer, noContainerfile)
	b := waitCondition(t, waitNewBuild(t, "logs").Name, v1alpha1.BuildSucceeded)
	logs.Wait(t, timeout, "Created build", map[string]string{"build": b.Name, "renderedConfig": "rendered-logs-v1"})
	logs.Wait(t, timeout, "Build succeeded", map[string]string{"build": b.Name, "image": b.Status.DigestedImagePushSpec, "strategy": "ConfigLayer"})

	if err := env.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "logs-push"}}); err != nil {
		t.Fatal(err)
	}
	logs.Wait(t, timeout, "Cannot build", map[string]string{"reason": v1alpha1.ReasonMissingSecret})
}

// Garbage collection never deletes an image a kept build also has: builds
// of different inputs can give one digest (here, a new builder image that
// a configuration layer on the base does not use).
func TestGarbageCollectionSparesSharedDigests(t *testing.T) {
	f := newFixture(t, "shared")
	stop := startController(t, f.reg, 1, func(c *Config) { c.BuilderImage = "127.0.0.1:5000/strata/builder:a" })
	f.mosc(configLayer, noContainerfile)
	a := waitCondition(t, waitNewBuild(t, "shared").Name, v1alpha1.BuildSucceeded)
	f.setRendered("2")
	b := waitCondition(t, waitNewBuild(t, "shared", a.Name).Name, v1alpha1.BuildSucceeded)
	stop()

	// Another builder image: configuration 1 again is a new build, C, of
	// A's image.
	startController(t, f.reg, 1, func(c *Config) { c.BuilderImage = "127.0.0.1:5000/strata/builder:b" })
	f.setRendered("1")
	c := waitCondition(t, waitNewBuild(t, "shared", b.Name).Name, v1alpha1.BuildSucceeded)
	if c.Name == a.Name || c.Status.DigestedImagePushSpec != a.Status.DigestedImagePushSpec {
		t.Fatalf("build %s of %s after %s of %s; the test needs two builds of one image", c.Name, c.Status.DigestedImagePushSpec, a.Name, a.Status.DigestedImagePushSpec)
	}
	// D makes A and B old beyond a history of one (C is kept).
	f.setRendered("3")
	waitCondition(t, waitNewBuild(t, "shared", c.Name).Name, v1alpha1.BuildSucceeded)
	eventually(t, "A collected", func() error {
		if _, err := getBuild(a.Name); err == nil {
			return errors.New("still there")
		}
		return nil
	})
	if _, err := getBuild(c.Name); err != nil {
		t.Fatalf("C: %v", err)
	}
	ref, err := name.ParseReference(c.Status.DigestedImagePushSpec, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(ref, remote.WithAuth(f.reg.Auth())); err != nil {
		t.Errorf("kept build C's image %s is gone with A: %v", c.Status.DigestedImagePushSpec, err)
	}
}
