package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/attest"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/internal/referrers"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/version"
	"github.com/strata-dev/strata/provenance"
	"github.com/strata-dev/strata/sbom"
	"github.com/strata-dev/strata/test/testregistry"
)

// singleJob makes the fixture's MachineOSConfig build in one Job (the
// fixture's default, said where it matters).
func singleJob(m *v1alpha1.MachineOSConfig) {
	m.Spec.ImageBuilder.Strategy = v1alpha1.SingleJobStrategy
}

// keychain is the fixture registry's credentials as the controller reads
// them.
func (f *fixture) keychain() authn.Keychain {
	f.t.Helper()
	kc, err := registry.Keychain(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "test"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: f.reg.DockerConfigJSON(f.password)},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return kc
}

func (f *fixture) referrers() referrers.Client {
	return referrers.Client{Registry: registry.Client{Insecure: []string{f.reg.Host}}}
}

// listReferrers lists an image's referrers through the registry.
func (f *fixture) listReferrers(image string) []referrers.Referrer {
	f.t.Helper()
	list, err := f.referrers().List(context.Background(), image, f.keychain())
	if err != nil {
		f.t.Fatalf("list the referrers of %s: %v", image, err)
	}
	return list
}

// exists says whether the fixture's registry has ref's manifest.
func (f *fixture) exists(ref string) bool {
	f.t.Helper()
	ok, err := registry.Client{Insecure: []string{f.reg.Host}}.Exists(context.Background(), ref, f.keychain())
	if err != nil {
		f.t.Fatal(err)
	}
	return ok
}

// fallbackTag is an image's tag of the referrers tag schema.
func fallbackTag(image string) string {
	repo, digest, _ := strings.Cut(image, "@")
	return repo + ":" + strings.Replace(digest, ":", "-", 1)
}

// succeedWith plays a build's Job pushing img, and returns it by digest.
func (f *fixture) succeedWith(b *v1alpha1.MachineOSBuild, img v1.Image) string {
	f.t.Helper()
	image := f.pushImage(b, img)
	f.reportPushed(b, image)
	return image
}

// pushImage pushes img where a build's Job would, and returns it by
// digest.
func (f *fixture) pushImage(b *v1alpha1.MachineOSBuild, img v1.Image) string {
	f.t.Helper()
	ref, err := name.ParseReference(b.Spec.RenderedImagePushSpec, name.Insecure)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(f.reg.Auth())); err != nil {
		f.t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		f.t.Fatal(err)
	}
	return ref.Context().Name() + "@" + d.String()
}

// reportPushed plays the build pod's report of a pushed image.
func (f *fixture) reportPushed(b *v1alpha1.MachineOSBuild, image string) {
	f.t.Helper()
	_, digest, _ := strings.Cut(image, "@")
	msg, _ := json.Marshal(job.TerminationMessage{Digest: digest})
	finishPod(f.t, b, corev1.PodSucceeded, 0, string(msg))
}

// expectedArtifacts are the SBOM and provenance a build of the fixture's
// current inputs must have, made here from the same inputs the controller
// reads, so that the test fails when the controller hands the generators
// anything else.
func (f *fixture) expectedArtifacts(b *v1alpha1.MachineOSBuild) (sbomDoc, statement []byte) {
	f.t.Helper()
	ctx := context.Background()
	mosc := getMOSC(f.t, b.Spec.MachineOSConfig.Name)
	rendered := &v1alpha1.MachineConfig{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: b.Spec.MachineConfig.Name}, rendered); err != nil {
		f.t.Fatal(err)
	}
	res, err := containerfile.Render(containerfile.Input{
		ConfigName: rendered.Name, Pool: f.name, Spec: &rendered.Spec, BaseImage: b.Status.BaseImagePullSpec,
		Arch: "amd64", Containerfiles: mosc.Spec.ContainerFile,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	var layer []byte
	for _, cf := range res.Context {
		if cf.Name == containerfile.RootfsName {
			layer = cf.Data
		}
	}
	if layer == nil {
		f.t.Fatal("the render has no rootfs.tar: the SBOM would list no file")
	}
	repo, digest, _ := strings.Cut(b.Status.DigestedImagePushSpec, "@")
	sbomDoc, err = sbom.Generate(sbom.Input{Image: repo, ImageDigest: digest, BaseImage: b.Status.BaseImagePullSpec, Pool: f.name,
		RenderedConfig: rendered.Name, InputHash: res.InputHash, Layer: layer, Spec: &rendered.Spec})
	if err != nil {
		f.t.Fatal(err)
	}
	var admin string
	if st := machineosbuild.FindStage(b, v1alpha1.BuildStageAdmin); b.Status.Strategy == v1alpha1.ConfigLayerStrategy && st != nil && st.Image != b.Status.BaseImagePullSpec {
		admin = st.Image
	}
	statement, err = provenance.Generate(provenance.Input{Image: repo, ImageDigest: digest, BaseImage: b.Status.BaseImagePullSpec, AdminStage: admin,
		Pool: f.name, RenderedConfig: rendered.Name, MachineOSConfig: mosc.Name, MachineOSConfigGeneration: mosc.Generation,
		Strategy: string(b.Status.Strategy), Containerfile: res.Containerfile, InputHash: res.InputHash,
		BuilderID: attest.BuilderID, BuilderVersion: version.Version})
	if err != nil {
		f.t.Fatal(err)
	}
	return sbomDoc, statement
}

// checkReferrers checks that a succeeded build's status names its SBOM
// and provenance, that the registry lists exactly those as the image's
// referrers (through its referrers API when it has one, else through the
// referrers tag schema), and that their content is what the build's inputs
// give.
func (f *fixture) checkReferrers(b *v1alpha1.MachineOSBuild) {
	f.t.Helper()
	image := b.Status.DigestedImagePushSpec
	want := map[string]string{}
	for _, r := range b.Status.Referrers {
		want[r.ArtifactType] = r.Digest
	}
	if len(want) != 2 || want[sbom.ArtifactType] == "" || want[provenance.ArtifactType] == "" {
		f.t.Fatalf("status.referrers = %+v, want the SBOM and the provenance", b.Status.Referrers)
	}
	if st := machineosbuild.FindStage(b, v1alpha1.BuildStageAttach); st == nil || st.StartTime == nil || st.Duration == nil {
		f.t.Errorf("Attach stage %+v, want it with its time", st)
	}
	list := f.listReferrers(image)
	got := map[string]string{}
	for _, r := range list {
		got[r.ArtifactType] = r.Digest.String()
	}
	if len(list) != 2 || got[sbom.ArtifactType] != want[sbom.ArtifactType] || got[provenance.ArtifactType] != want[provenance.ArtifactType] {
		f.t.Errorf("the registry lists the referrers %+v, the status %+v", list, b.Status.Referrers)
	}
	// Where the registry found them.
	if tagged := f.exists(fallbackTag(image)); tagged == f.reg.Referrers {
		f.t.Errorf("referrers API %v, but the tag %s exists: %v", f.reg.Referrers, fallbackTag(image), tagged)
	}
	wantSBOM, wantProv := f.expectedArtifacts(b)
	for _, r := range list {
		data, err := f.referrers().Read(context.Background(), image, r, f.keychain())
		if err != nil {
			f.t.Fatal(err)
		}
		wantData := map[string][]byte{sbom.ArtifactType: wantSBOM, provenance.ArtifactType: wantProv}[r.ArtifactType]
		if !bytes.Equal(data, wantData) {
			f.t.Errorf("%s referrer of %s:\n%s\nwant\n%s", r.ArtifactType, image, data, wantData)
		}
	}
}

// TestReferrersAttached: a succeeded build's image has its SBOM and
// provenance attached, with both strategies and on both kinds of
// registry, and a rebuild of the same inputs gives the same image with
// the same referrers, nothing added.
func TestReferrersAttached(t *testing.T) {
	for _, c := range []struct {
		name   string
		start  func(testing.TB, string) *testregistry.Registry
		mutate []func(*v1alpha1.MachineOSConfig)
	}{
		{"refs-layer-api", testregistry.StartReferrers, []func(*v1alpha1.MachineOSConfig){configLayer, noContainerfile}},
		{"refs-job-api", testregistry.StartReferrers, []func(*v1alpha1.MachineOSConfig){singleJob}},
		// The test cluster's registry: the referrers tag schema.
		{"refs-layer-dist", testregistry.Start, []func(*v1alpha1.MachineOSConfig){configLayer, noContainerfile}},
		{"refs-job-dist", testregistry.Start, []func(*v1alpha1.MachineOSConfig){singleJob}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixtureOn(t, c.name, c.start)
			startController(t, f.reg, 0)
			f.mosc(c.mutate...)
			img, err := random.Image(512, 2)
			if err != nil {
				t.Fatal(err)
			}
			// play builds the current inputs: the Job pushes img, which a
			// reproducible build would push again.
			play := func(not ...string) *v1alpha1.MachineOSBuild {
				t.Helper()
				b := waitNewBuild(t, c.name, not...)
				if getMOSC(t, c.name).Spec.ImageBuilder.Strategy == v1alpha1.SingleJobStrategy {
					b = waitBuild(t, c.name, not...)
					f.succeedWith(b, img)
				}
				return waitCondition(t, b.Name, v1alpha1.BuildSucceeded)
			}
			a := play()
			f.checkReferrers(a)
			if a.Status.Strategy == v1alpha1.ConfigLayerStrategy {
				f.checkAnnotations(a)
			}

			// The same inputs again: the build is made anew and attaches
			// the same bytes.
			annotate(t, c.name, v1alpha1.RebuildAnnotation)
			eventually(t, "the build is made anew", func() error {
				b, err := getBuild(a.Name)
				if err != nil {
					return err
				}
				if b.UID == a.UID {
					return errors.New("still the first build")
				}
				return nil
			})
			again := play()
			if again.Status.DigestedImagePushSpec != a.Status.DigestedImagePushSpec {
				t.Fatalf("the rebuild gave %s, first %s: the same inputs must give the same image", again.Status.DigestedImagePushSpec, a.Status.DigestedImagePushSpec)
			}
			if !slices.Equal(again.Status.Referrers, a.Status.Referrers) {
				t.Errorf("the rebuild's referrers %+v, first %+v", again.Status.Referrers, a.Status.Referrers)
			}
			f.checkReferrers(again)
		})
	}
}

// TestAttachRefusedFailsTheBuild: a registry that refuses the push
// credentials for the referrers fails the build in the Attach stage, and
// the previous image stays current.
func TestAttachRefusedFailsTheBuild(t *testing.T) {
	f := newFixtureOn(t, "refs-refused", testregistry.StartReferrers)
	f.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refs-refused-bad-push"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: f.reg.DockerConfigJSON("wrong-" + f.password)},
	})
	startController(t, f.reg, 0)
	// The Job pushes with credentials the test holds; the controller
	// attaches with the MachineOSConfig's, which the registry refuses.
	f.mosc(singleJob, func(m *v1alpha1.MachineOSConfig) { m.Spec.RenderedImagePushSecret.Name = "refs-refused-bad-push" })
	b := waitBuild(t, "refs-refused")
	f.succeed(b)
	b = waitCondition(t, b.Name, v1alpha1.BuildFailed)
	fl := b.Status.Failure
	if fl == nil || fl.Stage != v1alpha1.BuildStageAttach || fl.Step != v1alpha1.BuildStepAuth || !strings.Contains(fl.Message, "refused the credentials") {
		t.Errorf("failure %+v, want the Attach stage's Auth step", fl)
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildFailed); c == nil || !strings.Contains(c.Message, "Attach stage") {
		t.Errorf("Failed condition %+v does not name the Attach stage", c)
	}
	if len(b.Status.Referrers) != 0 || b.Status.DigestedImagePushSpec != "" {
		t.Errorf("a failed build names referrers %+v and image %q", b.Status.Referrers, b.Status.DigestedImagePushSpec)
	}
	if m := getMOSC(t, "refs-refused"); m.Status.CurrentImagePullSpec != "" {
		t.Errorf("the MachineOSConfig points at %s, built without its referrers", m.Status.CurrentImagePullSpec)
	}
}

// TestAttachRetriedWhileRegistryDown: a registry that stops answering
// after the image was pushed leaves the build Building, saying it
// retries; once it is back, the referrers are attached and the build
// succeeds.
func TestAttachRetriedWhileRegistryDown(t *testing.T) {
	f := newFixture(t, "refs-down")
	startController(t, f.reg, 0)
	f.mosc(singleJob)
	b := waitBuild(t, "refs-down")
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	image := f.pushImage(b, img)
	f.reg.Stop(t)
	f.reportPushed(b, image)
	eventually(t, "the build says it retries the attach", func() error {
		b, err := getBuild(b.Name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildBuilding)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "failed, retrying") {
			return fmt.Errorf("Building %+v", c)
		}
		return nil
	})
	if b, err := getBuild(b.Name); err != nil || machineosbuild.Terminal(b) {
		t.Fatalf("build %v (%v): ended while the registry was down", b.Status.Conditions, err)
	}
	f.reg.Restart(t)
	b = waitCondition(t, b.Name, v1alpha1.BuildSucceeded)
	f.checkReferrers(b)
}

// TestGarbageCollectionDeletesReferrers: an image the history no longer
// keeps goes with its referrers (and, on a registry without the
// referrers API, the index of the referrers tag schema); the current
// image keeps its own.
func TestGarbageCollectionDeletesReferrers(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(testing.TB, string) *testregistry.Registry
	}{
		{"refs-gc-api", testregistry.StartReferrers},
		{"refs-gc-dist", testregistry.Start},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixtureOn(t, c.name, c.start)
			// One finished build kept besides the current one: the third
			// build's success collects the first.
			startController(t, f.reg, 1)
			f.mosc(singleJob)
			var builds []*v1alpha1.MachineOSBuild
			for v := 1; v <= 3; v++ {
				var not []string
				if v > 1 {
					f.setRendered(fmt.Sprint(v))
					not = append(not, builds[len(builds)-1].Name)
				}
				b := waitBuild(t, c.name, not...)
				f.succeed(b)
				builds = append(builds, waitCondition(t, b.Name, v1alpha1.BuildSucceeded))
				if v == 1 {
					image := builds[0].Status.DigestedImagePushSpec
					if len(f.listReferrers(image)) != 2 {
						t.Fatalf("image %s has referrers %+v, want 2", image, f.listReferrers(image))
					}
					if !f.reg.Referrers && !f.exists(fallbackTag(image)) {
						t.Fatalf("%s missing before the collection", fallbackTag(image))
					}
				}
			}
			a := builds[0]
			oldImage := a.Status.DigestedImagePushSpec
			eventually(t, "the first build is collected", func() error {
				if _, err := getBuild(a.Name); !apierrors.IsNotFound(err) {
					return fmt.Errorf("build %s: %w", a.Name, err)
				}
				return nil
			})
			repo, _, _ := strings.Cut(oldImage, "@")
			for _, r := range a.Status.Referrers {
				if ref := repo + "@" + r.Digest; f.exists(ref) {
					t.Errorf("referrer %s (%s) of the collected image is still there", ref, r.ArtifactType)
				}
			}
			if list := f.listReferrers(oldImage); len(list) != 0 {
				t.Errorf("the collected image still lists referrers %+v", list)
			}
			if f.exists(fallbackTag(oldImage)) {
				t.Errorf("%s is still there", fallbackTag(oldImage))
			}
			if f.exists(oldImage) {
				t.Errorf("the collected image %s is still there", oldImage)
			}
			// The kept builds keep theirs.
			f.checkReferrers(builds[1])
			f.checkReferrers(builds[2])
		})
	}
}

// sbomIgnition is a configuration with every kind of entry an SBOM
// lists: files with modes and owners, directories, a symbolic and a hard
// link, units enabled and masked, and kernel arguments.
const sbomIgnition = `{"ignition":{"version":"3.4.0"},
 "storage":{
  "files":[
   {"path":"/etc/strata/secret.conf","mode":384,"user":{"id":1000},"group":{"id":1000},"contents":{"source":"data:,s3cret%0A"}},
   {"path":"/etc/strata/deep/er/x.conf","contents":{"source":"data:,deep%0A"}},
   {"path":"/usr/libexec/strata-tool","mode":493,"contents":{"source":"data:,%23!%2Fbin%2Fsh%0Aexit%200%0A"}}],
  "directories":[{"path":"/etc/strata","mode":488,"group":{"id":1000}},{"path":"/etc/strata/empty.d","mode":457}],
  "links":[
   {"path":"/etc/strata/current","target":"secret.conf"},
   {"path":"/usr/libexec/strata-tool-hard","target":"/usr/libexec/strata-tool","hard":true}]},
 "systemd":{"units":[
  {"name":"strata.service","enabled":true,"contents":"[Service]\nExecStart=/usr/libexec/strata-tool\n[Install]\nWantedBy=multi-user.target\n"},
  {"name":"debug-shell.service","mask":true}]}}`

// imageEntry is a path of an image's file system as crane export gives
// it.
type imageEntry struct {
	typ      byte
	mode     int64
	uid, gid int
	target   string
	sha256   string
}

// imageTree reads an image's flattened file system from the registry
// (go-containerregistry's mutate.Extract, what crane export writes).
func (f *fixture) imageTree(image string) map[string]imageEntry {
	f.t.Helper()
	rc := mutate.Extract(f.image(image))
	defer func() { _ = rc.Close() }()
	tree := map[string]imageEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tree
		}
		if err != nil {
			f.t.Fatal(err)
		}
		e := imageEntry{typ: h.Typeflag, mode: h.Mode & 0o7777, uid: h.Uid, gid: h.Gid, target: h.Linkname}
		if h.Typeflag == tar.TypeReg {
			sum := sha256.New()
			if _, err := io.Copy(sum, tr); err != nil {
				f.t.Fatal(err)
			}
			e.sha256 = hex.EncodeToString(sum.Sum(nil))
		}
		tree[path.Clean("/"+h.Name)] = e
	}
}

// TestSBOMMatchesTheImage: the SBOM attached to a ConfigLayer build lists
// every file, directory and link of the configuration with the digest,
// mode and owner it has in the image as read back from the registry, and
// the configuration layer adds nothing the SBOM leaves out but the parent
// directories the base already has.
func TestSBOMMatchesTheImage(t *testing.T) {
	f := newFixtureOn(t, "refs-sbom", testregistry.StartReferrers)
	base := f.reg.Push(t, "strata/busybox:1", testregistry.Busybox(t))
	mc := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "rendered-refs-sbom-x", Annotations: map[string]string{v1alpha1.GeneratedByControllerAnnotation: "test"}},
		Spec: v1alpha1.MachineConfigSpec{
			Config:          runtime.RawExtension{Raw: []byte(sbomIgnition)},
			KernelArguments: []string{"nosmt", "console=ttyS0,115200"},
		},
	}
	f.create(mc)
	f.pointPool(mc.Name)
	startController(t, f.reg, 0)
	f.mosc(configLayer, noContainerfile, func(m *v1alpha1.MachineOSConfig) { m.Spec.BaseImagePullSpec = base })
	b := waitCondition(t, waitNewBuild(t, "refs-sbom").Name, v1alpha1.BuildSucceeded)
	image := b.Status.DigestedImagePushSpec

	var doc []byte
	for _, r := range f.listReferrers(image) {
		if r.ArtifactType == sbom.ArtifactType {
			var err error
			if doc, err = f.referrers().Read(context.Background(), image, r, f.keychain()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if doc == nil {
		t.Fatalf("no SBOM referrer of %s", image)
	}
	d, err := sbom.Read(doc)
	if err != nil {
		t.Fatal(err)
	}
	repo, digest, _ := strings.Cut(image, "@")
	if d.Image != repo || d.ImageDigest != digest || d.Base+"@"+d.BaseDigest != b.Status.BaseImagePullSpec {
		t.Errorf("SBOM describes %s@%s on %s@%s, want %s on %s", d.Image, d.ImageDigest, d.Base, d.BaseDigest, image, b.Status.BaseImagePullSpec)
	}
	if strings.Join(d.Configuration.KernelArguments, " ") != "nosmt console=ttyS0,115200" || len(d.Configuration.Units) != 2 {
		t.Errorf("SBOM configuration %+v", d.Configuration)
	}

	tree := f.imageTree(image)
	types := map[string]byte{"file": tar.TypeReg, "directory": tar.TypeDir, "symlink": tar.TypeSymlink, "hardlink": tar.TypeLink}
	listed := map[string]bool{}
	for _, sf := range d.Files {
		listed[sf.Path] = true
		e, ok := tree[sf.Path]
		if !ok {
			t.Errorf("the SBOM lists %s, which the image lacks", sf.Path)
			continue
		}
		if got := fmt.Sprintf("%04o", e.mode); e.typ != types[sf.Type] || got != sf.Mode || e.uid != sf.UID || e.gid != sf.GID {
			t.Errorf("%s: SBOM %s %s %d:%d, image type %q mode %s %d:%d", sf.Path, sf.Type, sf.Mode, sf.UID, sf.GID, e.typ, got, e.uid, e.gid)
		}
		switch sf.Type {
		case "file":
			if sf.SHA256 != e.sha256 {
				t.Errorf("%s: SBOM sha256 %s, image %s", sf.Path, sf.SHA256, e.sha256)
			}
		case "symlink":
			if sf.Target != e.target {
				t.Errorf("%s: SBOM target %s, image %s", sf.Path, sf.Target, e.target)
			}
		case "hardlink":
			if sf.Target != path.Clean("/"+e.target) {
				t.Errorf("%s: SBOM target %s, image %s", sf.Path, sf.Target, e.target)
			}
		}
	}
	for _, p := range []string{"/etc/strata", "/etc/strata/empty.d", "/etc/strata/secret.conf", "/etc/strata/deep/er/x.conf",
		"/etc/strata/current", "/usr/libexec/strata-tool", "/usr/libexec/strata-tool-hard", "/etc/systemd/system/strata.service",
		"/etc/systemd/system/multi-user.target.wants/strata.service", "/etc/systemd/system/debug-shell.service",
		"/usr/lib/bootc/kargs.d/10-strata.toml"} {
		if !listed[p] {
			t.Errorf("the SBOM does not list %s", p)
		}
	}

	// Everything the configuration layer carries is listed, but for the
	// parent directories completed from the base (/etc, /usr/lib, ...).
	layers, err := f.image(image).Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	baseTree := f.imageTree(b.Status.BaseImagePullSpec)
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := path.Clean("/" + h.Name)
		if listed[p] {
			continue
		}
		if be, inBase := baseTree[p]; h.Typeflag != tar.TypeDir || !inBase && !isParentOfListed(p, listed) || inBase && be.mode != h.Mode&0o7777 {
			t.Errorf("the configuration layer has %s (type %q, mode %04o), which the SBOM does not list", p, h.Typeflag, h.Mode&0o7777)
		}
	}
}

// isParentOfListed says whether p is a parent directory of a listed path.
func isParentOfListed(p string, listed map[string]bool) bool {
	for l := range listed {
		if strings.HasPrefix(l, p+"/") {
			return true
		}
	}
	return false
}
