package bootcsim_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/ostreeimage"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/testregistry"
)

// testImage is a pushed test image.
type testImage struct {
	Ref    string // host/repo@sha256:...
	Digest string
}

// otherArch is an architecture that is not the host's, for a kargs.d file
// that must not apply.
func otherArch() string {
	if ostreeimage.HostArch() == "s390x" {
		return "aarch64"
	}
	return "s390x"
}

// pushImage pushes the busybox base plus one layer of files (a trailing
// "/" makes a directory), with an image version label.
func pushImage(t *testing.T, reg *testregistry.Registry, repoTag, version string, files map[string]string) testImage {
	t.Helper()
	layer := testregistry.FilesLayer(t, files)
	img, err := mutate.AppendLayers(testregistry.Busybox(t), layer)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.version": version}
	cfg.Created = v1.Time{Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	ref := reg.Push(t, repoTag, img)
	_, digest, _ := strings.Cut(ref, "@")
	return testImage{Ref: ref, Digest: digest}
}

// twoImages pushes image one and image two of the lifecycle: /etc files
// changed, added and kept, a /var file, kernel arguments.
func twoImages(t *testing.T, reg *testregistry.Registry) (one, two testImage) {
	t.Helper()
	one = pushImage(t, reg, "strata/os:one", "1", map[string]string{
		"etc/motd":                                 "motd one\n",
		"etc/strata/a.conf":                        "a=1\n",
		"etc/strata/keep.conf":                     "keep\n",
		"var/lib/strata-test/data":                 "image one var\n",
		"usr/lib/os-release":                       "ID=strata-test\nVERSION_ID=1\n",
		"usr/lib/bootc/kargs.d/10-strata.toml":     "# image one\nkargs = [\"console=ttyS0\", \"strata.image=one\"]\n",
		"usr/lib/bootc/kargs.d/20-other-arch.toml": "kargs = [\"never\"]\nmatch-architectures = [\"" + otherArch() + "\"]\n",
	})
	two = pushImage(t, reg, "strata/os:two", "2", map[string]string{
		"etc/motd":                             "motd two\n",
		"etc/strata/a.conf":                    "a=2\n",
		"etc/strata/keep.conf":                 "keep\n",
		"etc/strata/new.conf":                  "new=2\n",
		"var/lib/strata-test/data":             "image two var\n",
		"usr/lib/os-release":                   "ID=strata-test\nVERSION_ID=2\n",
		"usr/lib/bootc/kargs.d/10-strata.toml": "kargs = [\n  \"console=ttyS0\",\n  \"strata.image=two\", # new\n]\n",
	})
	return one, two
}

// newNode returns a simulator on a fresh node directory that is removed
// (immutable deployments included) when the test ends, passed or not.
func newNode(t *testing.T) (*bootcsim.Sim, *bytes.Buffer) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "node")
	// Registered after TempDir's own cleanup, so it runs before it.
	t.Cleanup(func() {
		if err := bootcsim.Cleanup(root); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	s, err := bootcsim.New(root)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.Out = &out
	return s, &out
}

func status(t *testing.T, s *bootcsim.Sim) *bootc.Host {
	t.Helper()
	h, err := s.Status(context.Background())
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return h
}

// digestOf is an entry's image digest, "" for no entry.
func digestOf(e *bootc.BootEntry) string {
	if e == nil || e.Image == nil {
		return ""
	}
	return e.Image.ImageDigest
}

func expectEntries(t *testing.T, h *bootc.Host, staged, booted, rollback string, queued bool) {
	t.Helper()
	got := []string{digestOf(h.Status.Staged), digestOf(h.Status.Booted), digestOf(h.Status.Rollback)}
	want := []string{staged, booted, rollback}
	if !slices.Equal(got, want) || h.Status.RollbackQueued != queued {
		t.Fatalf("staged/booted/rollback = %q queued %v, want %q queued %v", got, h.Status.RollbackQueued, want, queued)
	}
	order := bootc.BootOrderDefault
	if queued {
		order = bootc.BootOrderRollback
	}
	if h.Spec.BootOrder != order {
		t.Fatalf("spec.bootOrder = %q, want %q", h.Spec.BootOrder, order)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func expectFile(t *testing.T, path, want string) {
	t.Helper()
	if got := readFile(t, path); got != want {
		t.Fatalf("%s = %q, want %q", path, got, want)
	}
}

func expectNoFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s exists (err %v), want it absent", path, err)
	}
}

func bootID(t *testing.T, s *bootcsim.Sim) string {
	t.Helper()
	id, err := s.BootID()
	if err != nil || len(id) != 36 {
		t.Fatalf("boot id %q: %v", id, err)
	}
	return id
}

func expectKargs(t *testing.T, s *bootcsim.Sim, want ...string) {
	t.Helper()
	got, err := s.Kargs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("kargs = %q, want %q", got, want)
	}
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	one, two := twoImages(t, reg)
	s, out := newNode(t)
	etc := filepath.Join(s.Root, "etc")

	// Install: image one is booted.
	if err := s.Init(ctx, one.Ref); err != nil {
		t.Fatalf("init: %v", err)
	}
	h := status(t, s)
	if h.APIVersion != "org.containers.bootc/v1" || h.Kind != "BootcHost" || h.Metadata.Name != "host" {
		t.Fatalf("header = %s %s %s", h.APIVersion, h.Kind, h.Metadata.Name)
	}
	expectEntries(t, h, "", one.Digest, "", false)
	b := h.Status.Booted.Image
	if b.Image.Image != one.Ref || b.Image.Transport != "registry" || b.Architecture != "amd64" ||
		b.Version != "1" || b.Timestamp != "2025-01-02T03:04:05Z" {
		t.Fatalf("booted image = %+v", b)
	}
	if h.Spec.Image == nil || h.Spec.Image.Image != one.Ref || h.Status.Type == nil || *h.Status.Type != "bootcHost" {
		t.Fatalf("spec = %+v, type = %v", h.Spec, h.Status.Type)
	}
	if o := h.Status.Booted.Ostree; o == nil || o.Stateroot != "strata" || len(o.Checksum) != 64 {
		t.Fatalf("booted ostree = %+v", o)
	}
	expectFile(t, filepath.Join(etc, "motd"), "motd one\n")
	expectFile(t, filepath.Join(etc, "passwd"), readFile(t, filepath.Join(s.Root, "usr", "etc", "passwd")))
	expectFile(t, filepath.Join(s.Root, "var", "lib", "strata-test", "data"), "image one var\n")
	expectFile(t, filepath.Join(s.Root, "usr", "lib", "os-release"), "ID=strata-test\nVERSION_ID=1\n")
	if fi, err := os.Stat(filepath.Join(s.Root, "home")); err != nil || !fi.IsDir() {
		t.Fatalf("/home: %v", err)
	}
	expectKargs(t, s, "console=ttyS0", "strata.image=one")
	firstBoot := bootID(t, s)
	if err := s.Init(ctx, one.Ref); err != nil {
		t.Fatalf("init again with the same image: %v", err)
	}
	if err := s.Init(ctx, two.Ref); err == nil {
		t.Fatal("init with another image succeeded on an installed node")
	}

	// The node's own changes: /etc edits, a removal, /var data.
	mustWrite(t, filepath.Join(etc, "motd"), "local motd\n")
	mustWrite(t, filepath.Join(etc, "local.conf"), "local\n")
	if err := os.Remove(filepath.Join(etc, "strata", "keep.conf")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(s.Root, "var", "lib", "node-owned"), "node\n")

	// Switch: image two is staged, nothing else moves.
	changed, err := s.Switch(ctx, two.Ref, bootcsim.SwitchOptions{Transport: "registry", Retain: true})
	if err != nil || !changed {
		t.Fatalf("switch = %v, %v; output:\n%s", changed, err, out)
	}
	if !strings.Contains(out.String(), "Queued for next boot: "+two.Ref) {
		t.Fatalf("switch output:\n%s", out)
	}
	h = status(t, s)
	expectEntries(t, h, two.Digest, one.Digest, "", false)
	if h.Spec.Image.Image != two.Ref || h.Status.Staged.Image.Image.Image != two.Ref {
		t.Fatalf("spec after switch = %+v", h.Spec.Image)
	}
	expectFile(t, filepath.Join(etc, "motd"), "local motd\n")
	if bootID(t, s) != firstBoot {
		t.Fatal("switch changed the boot id")
	}
	out.Reset()
	for _, ref := range []string{two.Ref, strings.Replace(two.Ref, "@", ":two@", 1)} {
		changed, err = s.Switch(ctx, ref, bootcsim.SwitchOptions{})
		if err != nil || changed || !strings.Contains(out.String(), "Image specification is unchanged.") || strings.Contains(out.String(), "Fetching") {
			t.Fatalf("switch %s again = %v, %v; output:\n%s", ref, changed, err, out)
		}
	}
	// Written after the switch: the merge happens at the reboot, from
	// the booted /etc as it is then.
	mustWrite(t, filepath.Join(etc, "after-switch.conf"), "late\n")
	mustWrite(t, filepath.Join(s.Root, "run", "ostree", "auth.json"), "{}")
	if err := s.RequestReboot(); err != nil {
		t.Fatal(err)
	}
	if req, err := s.RebootRequested(); err != nil || !req {
		t.Fatalf("reboot requested = %v, %v", req, err)
	}

	// Reboot into image two: the three-way merge and the shared /var.
	if err := s.Reboot(ctx); err != nil {
		t.Fatalf("reboot: %v", err)
	}
	secondBoot := bootID(t, s)
	if secondBoot == firstBoot {
		t.Fatal("reboot kept the boot id")
	}
	if req, err := s.RebootRequested(); err != nil || req {
		t.Fatalf("reboot request after the reboot = %v, %v", req, err)
	}
	expectEntries(t, status(t, s), "", two.Digest, one.Digest, false)
	expectFile(t, filepath.Join(etc, "motd"), "local motd\n")          // local edit wins
	expectFile(t, filepath.Join(etc, "strata", "a.conf"), "a=2\n")     // image change arrives
	expectFile(t, filepath.Join(etc, "strata", "new.conf"), "new=2\n") // new image file arrives
	expectFile(t, filepath.Join(etc, "local.conf"), "local\n")         // local file stays
	expectFile(t, filepath.Join(etc, "after-switch.conf"), "late\n")   // merged at the reboot
	expectNoFile(t, filepath.Join(etc, "strata", "keep.conf"))         // local removal stays
	expectFile(t, filepath.Join(s.Root, "usr", "etc", "motd"), "motd two\n")
	expectFile(t, filepath.Join(s.Root, "var", "lib", "strata-test", "data"), "image one var\n")
	expectFile(t, filepath.Join(s.Root, "var", "lib", "node-owned"), "node\n")
	expectNoFile(t, filepath.Join(s.Root, "run", "ostree"))
	expectKargs(t, s, "console=ttyS0", "strata.image=two")

	// A failing image fails the health check; the other does not.
	if err := s.Health(ctx); err != nil {
		t.Fatalf("health before fail-boot: %v", err)
	}
	if err := s.FailBoot(two.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.Health(ctx); err == nil || !strings.Contains(err.Error(), two.Digest) {
		t.Fatalf("health of a failing image = %v", err)
	}

	// Rollback: queued until the reboot, then image one is booted again,
	// with the /etc it had.
	out.Reset()
	if err := s.Rollback(ctx); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	expectEntries(t, status(t, s), "", two.Digest, one.Digest, true)
	if err := s.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	expectEntries(t, status(t, s), "", one.Digest, two.Digest, false)
	if err := s.Health(ctx); err != nil {
		t.Fatalf("health after the rollback: %v", err)
	}
	expectFile(t, filepath.Join(etc, "strata", "a.conf"), "a=1\n")
	expectNoFile(t, filepath.Join(etc, "strata", "new.conf"))
	expectFile(t, filepath.Join(etc, "motd"), "local motd\n")
	expectKargs(t, s, "console=ttyS0", "strata.image=one")

	// Switching again to a still deployed image downloads nothing; a
	// rollback drops the staged deployment, a second one reverts it.
	out.Reset()
	if changed, err := s.Switch(ctx, two.Ref, bootcsim.SwitchOptions{}); err != nil || !changed || strings.Contains(out.String(), "Fetching") {
		t.Fatalf("switch back = %v, %v; output:\n%s", changed, err, out)
	}
	expectEntries(t, status(t, s), two.Digest, one.Digest, two.Digest, false)
	if n := len(deploymentDirs(t, s)); n != 3 {
		t.Fatalf("%d deployments, want 3", n)
	}
	if err := s.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	expectEntries(t, status(t, s), "", one.Digest, two.Digest, true)
	out.Reset()
	if err := s.Rollback(ctx); err != nil || !strings.Contains(out.String(), "Reverting queued rollback") {
		t.Fatalf("second rollback = %v; output:\n%s", err, out)
	}
	expectEntries(t, status(t, s), "", one.Digest, two.Digest, false)
	if err := s.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	expectEntries(t, status(t, s), "", one.Digest, two.Digest, false)
	if n := len(deploymentDirs(t, s)); n != 2 {
		t.Fatalf("%d deployments after the reboot, want 2", n)
	}
}

func deploymentDirs(t *testing.T, s *bootcsim.Sim) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(s.Root, "sysroot", "ostree", "deploy", "strata", "deploy", "*.[0-9]*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		if !strings.HasSuffix(d, ".origin") {
			out = append(out, d)
		}
	}
	return out
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRegistryAuth(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "s3cret")
	img := pushImage(t, reg, "strata/private:v1", "1", map[string]string{"etc/hello": "hi\n"})
	s, _ := newNode(t)

	err := s.Init(ctx, img.Ref)
	if err == nil || !strings.Contains(err.Error(), "requires authentication and the node has no auth file") ||
		!strings.Contains(err.Error(), "/run/ostree/auth.json") {
		t.Fatalf("init without an auth file = %v", err)
	}
	auth := filepath.Join(s.Root, "run", "ostree", "auth.json")
	if err := os.MkdirAll(filepath.Dir(auth), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(auth, reg.DockerConfigJSON("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Init(ctx, img.Ref); err == nil || !strings.Contains(err.Error(), "rejected the credentials of /run/ostree/auth.json") {
		t.Fatalf("init with a wrong password = %v", err)
	}
	if err := os.WriteFile(auth, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Init(ctx, img.Ref); err == nil || !strings.Contains(err.Error(), "auth file /run/ostree/auth.json") {
		t.Fatalf("init with a broken auth file = %v", err)
	}
	if err := os.WriteFile(auth, reg.DockerConfigJSON(reg.Password), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Init(ctx, img.Ref); err != nil {
		t.Fatalf("init with the auth file: %v", err)
	}
	expectEntries(t, status(t, s), "", img.Digest, "", false)
	expectFile(t, filepath.Join(s.Root, "etc", "hello"), "hi\n")
	// The boot emptied /run: /etc/ostree/auth.json, second in line, serves.
	expectNoFile(t, auth)
	img2 := pushImage(t, reg, "strata/private:v2", "2", map[string]string{"etc/hello": "hi again\n"})
	if _, err := s.Switch(ctx, img2.Ref, bootcsim.SwitchOptions{}); err == nil {
		t.Fatal("switch without credentials succeeded")
	}
	mustWrite(t, filepath.Join(s.Root, "etc", "ostree", "auth.json"), string(reg.DockerConfigJSON(reg.Password)))
	if _, err := s.Switch(ctx, img2.Ref, bootcsim.SwitchOptions{}); err != nil {
		t.Fatalf("switch with /etc/ostree/auth.json: %v", err)
	}
	expectEntries(t, status(t, s), img2.Digest, img.Digest, "", false)
}

func TestNotInitialized(t *testing.T) {
	s, _ := newNode(t)
	h := status(t, s)
	if h.Status.Booted != nil || h.Status.Type != nil || h.Spec.Image != nil || h.Kind != "BootcHost" {
		t.Fatalf("status of an empty node = %+v", h)
	}
	ctx := context.Background()
	if _, err := s.Switch(ctx, "127.0.0.1:1/x@sha256:"+strings.Repeat("a", 64), bootcsim.SwitchOptions{}); !errors.Is(err, bootcsim.ErrNotInitialized) {
		t.Fatalf("switch = %v", err)
	}
	if err := s.Reboot(ctx); !errors.Is(err, bootcsim.ErrNotInitialized) {
		t.Fatalf("reboot = %v", err)
	}
	if err := s.Rollback(ctx); !errors.Is(err, bootcsim.ErrNotInitialized) {
		t.Fatalf("rollback = %v", err)
	}
	if _, err := s.Switch(ctx, "x", bootcsim.SwitchOptions{Transport: "oci"}); err == nil {
		t.Fatal("switch with transport oci succeeded")
	}
}
