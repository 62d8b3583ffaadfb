package vmbootc_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-dev/strata/ostreeimage"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/testregistry"
	"github.com/strata-dev/strata/test/vmbootc"
)

// stateroot is not bootc's default ("default") nor the simulator's
// ("strata"): vmbootc must read it from the booted deployment.
const stateroot = "debian"

// installKargs are what the disk builder gives the first deployment.
var installKargs = []string{"root=/dev/vda", "rw", "console=ttyS0"}

// node is a directory sysroot with a deployment "booted" through the
// System seam.
type node struct {
	t    *testing.T
	root string
	sys  *vmbootc.System
}

type pushed struct {
	Ref, Digest string
	Img         v1.Image
}

// baseImage is a bootable image's tree: busybox, a kernel and an
// initramfs where ostree looks for them, os-release, kargs.d.
func baseImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, map[string]string{
		"usr/lib/modules/6.1.0-test/vmlinuz":       "kernel\n",
		"usr/lib/modules/6.1.0-test/initramfs.img": "initramfs\n",
		"usr/lib/os-release":                       "ID=debian\nVERSION_ID=12\n",
		"etc/strata/base.conf":                     "base\n",
		"usr/lib/bootc/kargs.d/10-base.toml":       "kargs = [\"quiet\", \"strata.base=1\"]\n",
		"usr/lib/bootc/kargs.d/20-other.toml":      "kargs = [\"never\"]\nmatch-architectures = [\"" + otherArch() + "\"]\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func otherArch() string {
	if ostreeimage.HostArch() == "s390x" {
		return "aarch64"
	}
	return "s390x"
}

// push pushes img plus a layer of files, labelled with version.
func push(t *testing.T, reg *testregistry.Registry, repoTag, version string, img v1.Image, files map[string]string) pushed {
	t.Helper()
	if files != nil {
		var err error
		if img, err = mutate.AppendLayers(img, testregistry.FilesLayer(t, files)); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.version": version}
	cfg.Created = v1.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	ref := reg.Push(t, repoTag, img)
	_, digest, _ := strings.Cut(ref, "@")
	return pushed{Ref: ref, Digest: digest, Img: img}
}

func ostree(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ostree", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ostree %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// install makes a directory sysroot with image deployed as the disk
// builder does (stateroot "debian", origin by digest, the install kernel
// arguments plus the image's), and boots it.
func install(t *testing.T, reg *testregistry.Registry, image pushed) *node {
	t.Helper()
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "node")
	t.Cleanup(func() {
		if err := bootcsim.Cleanup(root); err != nil {
			t.Error(err)
		}
	})
	sysroot := filepath.Join(root, "sysroot")
	if err := os.MkdirAll(sysroot, 0o755); err != nil {
		t.Fatal(err)
	}
	ostree(t, "admin", "init-fs", sysroot)
	ostree(t, "admin", "os-init", "--sysroot="+sysroot, stateroot)
	imp := ostreeimage.Repo{Path: filepath.Join(sysroot, "ostree", "repo")}
	ref, err := name.ParseReference(image.Ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithAuth(reg.Auth()))
	if err != nil {
		t.Fatal(err)
	}
	im, err := imp.Import(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	origin := filepath.Join(root, "origin")
	if err := os.WriteFile(origin, []byte(ostreeimage.Origin{Image: image.Ref}.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"admin", "deploy", "--sysroot=" + sysroot, "--os=" + stateroot, "--origin-file=" + origin, "--karg-none"}
	for _, k := range append(slices.Clone(installKargs), im.Kargs...) {
		args = append(args, "--karg-append="+k)
	}
	ostree(t, append(args, im.Checksum)...)

	n := &node{t: t, root: root, sys: &vmbootc.System{Sysroot: sysroot, Run: filepath.Join(root, "run")}}
	if err := os.MkdirAll(filepath.Join(n.sys.Run, "ostree"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.sys.Run, "ostree", "auth.json"), reg.DockerConfigJSON(reg.Password), 0o600); err != nil {
		t.Fatal(err)
	}
	n.boot()
	return n
}

// boot "boots" the first deployment of the boot loader order, as the
// guest's boot does: / is that deployment, /run starts empty but for
// the ostree-booted flag and the daemon's auth file. A staged deployment
// (deployed at once in a directory sysroot) is simply the first one.
func (n *node) boot() {
	n.t.Helper()
	deps, err := n.sys.Deployments()
	if err != nil {
		n.t.Fatal(err)
	}
	n.sys.Root = deps[0].Dir
	if err := os.Remove(filepath.Join(n.sys.Run, "ostree", "staged-deployment")); err != nil && !os.IsNotExist(err) {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.sys.Run, "ostree-booted"), nil, 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// bootc runs the command line and returns its exit status and output.
func (n *node) bootc(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = vmbootc.Main(context.Background(), n.sys, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func (n *node) mustBootc(args ...string) string {
	n.t.Helper()
	code, out, errOut := n.bootc(args...)
	if code != 0 {
		n.t.Fatalf("bootc %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// status is `bootc status --format=json` read by the daemon's parser.
func (n *node) status() *bootc.Host {
	n.t.Helper()
	h, err := bootc.Parse([]byte(n.mustBootc("status", "--format=json")))
	if err != nil {
		n.t.Fatal(err)
	}
	return h
}

func (n *node) deployments() []vmbootc.Deployment {
	n.t.Helper()
	deps, err := n.sys.Deployments()
	if err != nil {
		n.t.Fatal(err)
	}
	return deps
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestStatusOfInstalledNode(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "s3cret")
	one := push(t, reg, "strata/os:one", "1", baseImage(t), nil)
	n := install(t, reg, one)

	h := n.status()
	b := h.Status.Booted
	if b == nil || b.Image == nil {
		t.Fatalf("no booted image: %+v", h.Status)
	}
	if b.Image.Image.Image != one.Ref || b.Image.Image.Transport != bootc.TransportRegistry {
		t.Errorf("booted image %+v, want %s from the registry", b.Image.Image, one.Ref)
	}
	if b.Image.ImageDigest != one.Digest || b.PullSpec() != one.Ref {
		t.Errorf("booted digest %s, pull spec %s; want %s", b.Image.ImageDigest, b.PullSpec(), one.Ref)
	}
	if b.Image.Version != "1" || b.Image.Timestamp != "2026-01-02T03:04:05Z" || b.Image.Architecture != "amd64" {
		t.Errorf("booted image metadata %+v", b.Image)
	}
	deps := n.deployments()
	if b.Ostree == nil || b.Ostree.Stateroot != stateroot || b.Ostree.Checksum != deps[0].Checksum || b.Ostree.DeploySerial != 0 {
		t.Errorf("booted ostree %+v, want stateroot %s, commit %s.0", b.Ostree, stateroot, deps[0].Checksum)
	}
	if b.SoftRebootCapable || b.DownloadOnly || b.Store == nil || *b.Store != bootc.StoreOstreeContainer {
		t.Errorf("booted entry %+v", b)
	}
	if h.Status.Staged != nil || h.Status.Rollback != nil || h.Status.RollbackQueued {
		t.Errorf("a fresh node has only a booted deployment: %+v", h.Status)
	}
	if h.Status.Type == nil || *h.Status.Type != bootc.HostTypeBootc || h.Spec.Image == nil || h.Spec.Image.Image != one.Ref {
		t.Errorf("type %v, spec %+v", h.Status.Type, h.Spec)
	}
	// The YAML default and the older --json alias.
	if out := n.mustBootc("status"); !strings.Contains(out, "imageDigest: "+one.Digest) {
		t.Errorf("bootc status (YAML) does not show the digest:\n%s", out)
	}
	if out := n.mustBootc("status", "--json"); !strings.Contains(out, `"imageDigest": "`+one.Digest+`"`) {
		t.Errorf("bootc status --json:\n%s", out)
	}
}

func TestStatusOfHostOstreeDidNotBoot(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "")
	n := install(t, reg, push(t, reg, "strata/os:one", "1", baseImage(t), nil))
	if err := os.Remove(filepath.Join(n.sys.Run, "ostree-booted")); err != nil {
		t.Fatal(err)
	}
	if h := n.status(); h.Status.Booted != nil || h.Status.Type != nil {
		t.Errorf("without /run/ostree-booted the host is no bootc host: %+v", h.Status)
	}
	code, _, errOut := n.bootc("switch", "127.0.0.1:1/x@sha256:"+strings.Repeat("a", 64))
	if code != 1 || !strings.Contains(errOut, "error: Not booted into an ostree deployment") {
		t.Errorf("switch on a host ostree did not boot: exit %d, %q", code, errOut)
	}
}

// TestSwitchRebootRollback is the node's life: a derived image switched
// to and booted, then rolled back and the rollback reverted.
func TestSwitchRebootRollback(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "s3cret")
	base := baseImage(t)
	one := push(t, reg, "strata/os:one", "1", base, map[string]string{
		"etc/motd":                          "motd one\n",
		"etc/strata/a.conf":                 "a=1\n",
		"usr/lib/bootc/kargs.d/30-one.toml": "kargs = [\"strata.image=one\", \"shared=1\"]\n",
		"usr/share/strata/one":              "one\n",
	})
	// Two derives from one: one's layers and one more.
	two := push(t, reg, "strata/os:two", "2", one.Img, map[string]string{
		"etc/motd":                          "motd two\n",
		"etc/strata/new.conf":               "new=2\n",
		"usr/lib/bootc/kargs.d/30-one.toml": "kargs = [\"strata.image=two\", \"shared=1\"]\n",
	})
	n := install(t, reg, one)
	booted := n.deployments()[0]
	// A local setting: a karg only this machine has, an edited /etc file.
	if err := os.WriteFile(filepath.Join(booted.Dir, "etc", "strata", "a.conf"), []byte("a=local\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	out := n.mustBootc("switch", "--transport", "registry", two.Ref)
	for _, want := range []string{"Fetching " + two.Ref, "Queued for next boot: " + two.Ref, "  Version: 2", "  Digest: " + two.Digest} {
		if !strings.Contains(out, want) {
			t.Errorf("switch output lacks %q:\n%s", want, out)
		}
	}
	h := n.status()
	if h.Status.Staged.Digest() != two.Digest || h.Status.Booted.Digest() != one.Digest || h.Status.Rollback != nil {
		t.Fatalf("after switch: staged %s, booted %s, rollback %v", h.Status.Staged.Digest(), h.Status.Booted.Digest(), h.Status.Rollback)
	}
	if h.Spec.Image == nil || h.Spec.Image.Image != two.Ref {
		t.Errorf("spec %+v, want %s", h.Spec.Image, two.Ref)
	}
	deps := n.deployments()
	staged := deps[0]
	wantKargs := []string{"root=/dev/vda", "rw", "console=ttyS0", "quiet", "strata.base=1", "shared=1", "strata.image=two"}
	if !slices.Equal(staged.Kargs, wantKargs) {
		t.Errorf("staged kernel arguments %q, want %q (booted less one's, plus two's)", staged.Kargs, wantKargs)
	}
	if got := readFile(t, staged.Dir+".origin"); got != "[origin]\ncontainer-image-reference=ostree-unverified-registry:"+two.Ref+"\n" {
		t.Errorf("staged origin:\n%s", got)
	}
	// /etc merged as ostree does: the image's changes, the local edit.
	for file, want := range map[string]string{"motd": "motd two\n", "strata/new.conf": "new=2\n", "strata/a.conf": "a=local\n", "strata/base.conf": "base\n"} {
		if got := readFile(t, filepath.Join(staged.Dir, "etc", file)); got != want {
			t.Errorf("staged /etc/%s = %q, want %q", file, got, want)
		}
	}
	// The derived image's commit is two's whole tree: one's files and two's.
	if got := readFile(t, filepath.Join(staged.Dir, "usr", "share", "strata", "one")); got != "one\n" {
		t.Errorf("two's tree lacks one's layer: %q", got)
	}

	// The same image again: unchanged, nothing staged anew.
	if out := n.mustBootc("switch", two.Ref); strings.TrimSpace(out) != "Image specification is unchanged." {
		t.Errorf("switch to the staged image again: %q", out)
	}
	if got := n.deployments(); len(got) != 2 || got[0].Dir != staged.Dir {
		t.Errorf("an unchanged switch changed the deployments: %+v", got)
	}

	n.boot()
	h = n.status()
	if h.Status.Booted.Digest() != two.Digest || h.Status.Rollback.Digest() != one.Digest || h.Status.Staged != nil || h.Status.RollbackQueued {
		t.Fatalf("after the reboot: booted %s, rollback %s, staged %v, queued %v", h.Status.Booted.Digest(), h.Status.Rollback.Digest(), h.Status.Staged, h.Status.RollbackQueued)
	}
	if h.Status.Booted.Ostree.DeploySerial != 0 || h.Status.Rollback.Ostree.Stateroot != stateroot {
		t.Errorf("after the reboot: %+v, %+v", h.Status.Booted.Ostree, h.Status.Rollback.Ostree)
	}

	// Rollback: one boots next, with its kernel arguments, origin and
	// /etc (the local edit made while one was booted).
	out = n.mustBootc("rollback")
	if !strings.Contains(out, "Next boot: rollback deployment ("+one.Ref+")") {
		t.Errorf("rollback output: %q", out)
	}
	h = n.status()
	if !h.Status.RollbackQueued || h.Spec.BootOrder != bootc.BootOrderRollback || h.Status.Rollback.Digest() != one.Digest || h.Status.Booted.Digest() != two.Digest {
		t.Fatalf("after rollback: %+v", h.Status)
	}
	deps = n.deployments()
	if len(deps) != 2 || deps[0].Checksum != booted.Checksum || !deps[1].Booted {
		t.Fatalf("after rollback the order is %+v, want one's commit then the booted two", deps)
	}
	if !slices.Equal(deps[0].Kargs, booted.Kargs) {
		t.Errorf("rollback kernel arguments %q, want one's %q", deps[0].Kargs, booted.Kargs)
	}
	if got := readFile(t, filepath.Join(deps[0].Dir, "etc", "strata", "a.conf")); got != "a=local\n" {
		t.Errorf("rollback /etc/strata/a.conf = %q, want one's local edit", got)
	}
	if _, err := os.Stat(filepath.Join(deps[0].Dir, "etc", "strata", "new.conf")); !os.IsNotExist(err) {
		t.Errorf("rollback /etc has two's new.conf: %v", err)
	}
	if got := readFile(t, deps[0].Dir+".origin"); !strings.Contains(got, one.Ref) {
		t.Errorf("rollback origin: %q", got)
	}

	// Rollback again reverts the queued rollback.
	out = n.mustBootc("rollback")
	if !strings.Contains(out, "notice: Reverting queued rollback state") || !strings.Contains(out, "Next boot: current deployment") {
		t.Errorf("second rollback output: %q", out)
	}
	h = n.status()
	if h.Status.RollbackQueued || h.Spec.BootOrder != bootc.BootOrderDefault || h.Status.Rollback.Digest() != one.Digest {
		t.Fatalf("after the revert: %+v, order %s, rollback %s", h.Status, h.Spec.BootOrder, h.Status.Rollback.Digest())
	}
	deps = n.deployments()
	if len(deps) != 2 || !deps[0].Booted || deps[1].Checksum != booted.Checksum {
		t.Fatalf("after the revert the order is %+v", deps)
	}
	if got := readFile(t, filepath.Join(deps[1].Dir, "etc", "strata", "a.conf")); got != "a=local\n" {
		t.Errorf("reverted rollback's /etc/strata/a.conf = %q", got)
	}

	// Rollback and reboot: one is booted, two is the rollback.
	n.mustBootc("rollback")
	n.boot()
	h = n.status()
	if h.Status.Booted.Digest() != one.Digest || h.Status.Rollback.Digest() != two.Digest || h.Status.RollbackQueued {
		t.Fatalf("after rollback and reboot: %+v", h.Status)
	}
}

func TestRollbackDropsTheStagedDeployment(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "s3cret")
	base := baseImage(t)
	one := push(t, reg, "strata/os:one", "1", base, map[string]string{"etc/motd": "one\n"})
	two := push(t, reg, "strata/os:two", "2", base, map[string]string{"etc/motd": "two\n"})
	three := push(t, reg, "strata/os:three", "3", base, map[string]string{"etc/motd": "three\n"})
	n := install(t, reg, one)
	n.mustBootc("switch", two.Ref)
	n.boot()
	n.mustBootc("switch", three.Ref)
	if h := n.status(); h.Status.Staged.Digest() != three.Digest || h.Status.Rollback.Digest() != one.Digest {
		t.Fatalf("before rollback: %+v", h.Status)
	}
	n.mustBootc("rollback")
	h := n.status()
	if h.Status.Staged != nil || !h.Status.RollbackQueued || h.Status.Rollback.Digest() != one.Digest {
		t.Fatalf("rollback kept the staged deployment or did not queue one: %+v", h.Status)
	}
	if deps := n.deployments(); len(deps) != 2 {
		t.Errorf("deployments after rollback: %+v", deps)
	}
}

func TestSwitchKeepsStagedBootedAndOneRollback(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "s3cret")
	base := baseImage(t)
	n := install(t, reg, push(t, reg, "strata/os:one", "1", base, map[string]string{"etc/motd": "one\n"}))
	var last pushed
	for _, v := range []string{"2", "3", "4"} {
		last = push(t, reg, "strata/os:"+v, v, base, map[string]string{"etc/motd": v + "\n"})
		n.mustBootc("switch", last.Ref)
		n.boot()
	}
	// A staged deployment replaced by another switch.
	five := push(t, reg, "strata/os:5", "5", base, map[string]string{"etc/motd": "5\n"})
	six := push(t, reg, "strata/os:6", "6", base, map[string]string{"etc/motd": "6\n"})
	n.mustBootc("switch", five.Ref)
	n.mustBootc("switch", six.Ref)
	h := n.status()
	if h.Status.Staged.Digest() != six.Digest || h.Status.Booted.Digest() != last.Digest || h.Status.Rollback == nil {
		t.Fatalf("status %+v", h.Status)
	}
	if deps := n.deployments(); len(deps) != 3 {
		t.Errorf("%d deployments, want staged, booted and one rollback: %+v", len(deps), deps)
	}
	// The images of the deployments that went are forgotten, so that
	// ostree's prune removes them.
	refs, err := os.ReadDir(filepath.Join(n.sys.Sysroot, "ostree", "repo", "refs", "heads", "strata", "image"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, r := range refs {
		kept = append(kept, "sha256:"+r.Name())
	}
	slices.Sort(kept)
	want := []string{h.Status.Staged.Digest(), h.Status.Booted.Digest(), h.Status.Rollback.Digest()}
	slices.Sort(want)
	if !slices.Equal(kept, want) {
		t.Errorf("image refs %q, want those of the deployments %q", kept, want)
	}
}

func TestErrorsAsBootc(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "s3cret")
	one := push(t, reg, "strata/os:one", "1", baseImage(t), nil)
	n := install(t, reg, one)

	code, _, errOut := n.bootc("rollback")
	if code != 1 || errOut != "error: No rollback available\n" {
		t.Errorf("rollback without a rollback deployment: exit %d, %q", code, errOut)
	}
	// An option this bootc does not have is refused as clap refuses it.
	code, _, errOut = n.bootc("switch", "--soft-reboot=auto", one.Ref)
	if code != 2 || !strings.HasPrefix(errOut, "error: unexpected argument '--soft-reboot' found") {
		t.Errorf("switch --soft-reboot: exit %d, %q", code, errOut)
	}
	code, _, errOut = n.bootc("switch", "--download-only", "--from-downloaded", one.Ref)
	if code != 2 || !strings.HasPrefix(errOut, "error: the argument '--download-only' cannot be used with '--from-downloaded'") {
		t.Errorf("switch --download-only --from-downloaded: exit %d, %q", code, errOut)
	}
	code, _, errOut = n.bootc("upgrade", "--from-downloaded")
	if code != 1 || errOut != "error: No staged deployment found\n" {
		t.Errorf("upgrade --from-downloaded with nothing staged: exit %d, %q", code, errOut)
	}
	code, _, errOut = n.bootc("switch")
	if code != 2 || !strings.Contains(errOut, "<TARGET>") {
		t.Errorf("switch without a target: exit %d, %q", code, errOut)
	}
	// Without the auth file the registry refuses the pull.
	if err := os.Remove(filepath.Join(n.sys.Run, "ostree", "auth.json")); err != nil {
		t.Fatal(err)
	}
	two := push(t, reg, "strata/os:two", "2", baseImage(t), map[string]string{"etc/motd": "two\n"})
	code, _, errOut = n.bootc("switch", two.Ref)
	if code != 1 || !strings.Contains(errOut, "requires authentication") {
		t.Errorf("switch without credentials: exit %d, %q", code, errOut)
	}
	if h := n.status(); h.Status.Staged != nil {
		t.Errorf("a failed switch staged %+v", h.Status.Staged)
	}
}

// TestHelpListsOnlyWhatItDoes: the daemon reads the help to choose how
// to stage; this bootc stages locked (switch and upgrade
// --download-only, --from-downloaded) but has no soft reboot or
// signature enforcement, so the daemon must find only the former.
func TestHelpListsOnlyWhatItDoes(t *testing.T) {
	t.Parallel()
	n := &node{t: t, sys: &vmbootc.System{Sysroot: t.TempDir(), Run: t.TempDir(), Root: t.TempDir()}}
	caps := bootc.ParseCapabilities(n.mustBootc("switch", "--help"), n.mustBootc("upgrade", "--help"))
	if want := (bootc.Capabilities{SwitchDownloadOnly: true, UpgradeDownloadOnly: true}); caps != want {
		t.Errorf("capabilities from the help: %+v, want %+v", caps, want)
	}
	if !caps.LockedStaging() {
		t.Error("the daemon would not stage locked in one step")
	}
	if !strings.Contains(n.mustBootc("switch", "--help"), "--transport") {
		t.Error("switch --help does not list --transport")
	}
}

// liveStaged turns the first deployment, staged by a switch in the
// directory sysroot, into what ostree leaves in a booted system after
// deploy --stage: a deployment directory without a boot loader entry,
// named by the binary GVariant in /run/ostree/staged-deployment.
func (n *node) liveStaged() {
	n.t.Helper()
	d := n.deployments()[0]
	if !d.Staged {
		n.t.Fatalf("the first deployment is not staged: %+v", d)
	}
	if err := os.Remove(d.Entry); err != nil {
		n.t.Fatal(err)
	}
	blob := append([]byte("\x00target\x00osname\x00debian\x00csum\x00"), d.Checksum...)
	blob = append(blob, "\x00\x00\x00\x01deployserial\x00kargs\x00root=/dev/vda\x00"...)
	if err := os.WriteFile(filepath.Join(n.sys.Run, "ostree", "staged-deployment"), blob, 0o644); err != nil {
		n.t.Fatal(err)
	}
	n.sys.Live = true
}

func TestStatusOfLiveStagedDeployment(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "s3cret")
	base := baseImage(t)
	one := push(t, reg, "strata/os:one", "1", base, map[string]string{"etc/motd": "one\n"})
	two := push(t, reg, "strata/os:two", "2", base, map[string]string{"etc/motd": "two\n"})
	n := install(t, reg, one)
	// The daemon's form: options, then the image after "--".
	n.mustBootc("switch", "--transport", "registry", "--", two.Ref)
	n.liveStaged()
	h := n.status()
	if h.Status.Staged.Digest() != two.Digest || h.Status.Booted.Digest() != one.Digest || h.Status.Rollback != nil {
		t.Fatalf("live staged: staged %s, booted %s, rollback %v", h.Status.Staged.Digest(), h.Status.Booted.Digest(), h.Status.Rollback)
	}
	if h.Spec.Image.Image != two.Ref || h.Status.Staged.DownloadOnly {
		t.Errorf("spec %+v, staged %+v", h.Spec.Image, h.Status.Staged)
	}
	// ostree's finalization lock, as rpm-ostree or a newer ostree would
	// leave it: bootc calls such a staged deployment download-only.
	if err := os.WriteFile(filepath.Join(n.sys.Run, "ostree", "staged-deployment-locked"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if h := n.status(); !h.Status.Staged.DownloadOnly || h.Status.Booted.DownloadOnly {
		t.Errorf("locked: staged %+v, booted %+v", h.Status.Staged, h.Status.Booted)
	}

}

// TestLiveUnstageToTheBootedImage: the daemon replaces a staged image by
// switching to the booted one, which stages a second deployment of the
// booted commit; in a booted system only its missing boot loader entry
// tells it from the booted deployment.
func TestLiveUnstageToTheBootedImage(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "s3cret")
	base := baseImage(t)
	one := push(t, reg, "strata/os:one", "1", base, map[string]string{"etc/motd": "one\n"})
	two := push(t, reg, "strata/os:two", "2", base, map[string]string{"etc/motd": "two\n"})
	n := install(t, reg, one)
	n.mustBootc("switch", two.Ref)
	n.mustBootc("switch", one.Ref)
	n.liveStaged()
	h := n.status()
	st, b := h.Status.Staged, h.Status.Booted
	if st.Digest() != one.Digest || b.Digest() != one.Digest || h.Spec.Image.Image != one.Ref {
		t.Fatalf("staged %s, booted %s, spec %+v", st.Digest(), b.Digest(), h.Spec.Image)
	}
	if st.Ostree.Checksum != b.Ostree.Checksum || st.Ostree.DeploySerial == b.Ostree.DeploySerial {
		t.Errorf("staged %+v and booted %+v: want the same commit, another serial", st.Ostree, b.Ostree)
	}
	if deps := n.deployments(); len(deps) != 2 || !deps[0].Staged || !deps[1].Booted {
		t.Errorf("deployments %+v", deps)
	}
}

// commitObjects lists the commit objects of the node's repository.
func (n *node) commitObjects() []string {
	n.t.Helper()
	files, err := filepath.Glob(filepath.Join(n.sys.Sysroot, "ostree", "repo", "objects", "*", "*.commit"))
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		out = append(out, filepath.Base(filepath.Dir(f))+strings.TrimSuffix(filepath.Base(f), ".commit"))
	}
	return out
}

// TestSwitchToDerivedImageCommitsOnlyItsNewLayer: an image built on the
// booted one costs one layer commit and the image commit, the base's
// layer commits are reused (in the emulated guest a full import costs
// 10-23 s a switch).
func TestSwitchToDerivedImageCommitsOnlyItsNewLayer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := testregistry.Start(t, "s3cret")
	one := push(t, reg, "strata/os:one", "1", baseImage(t), map[string]string{"usr/share/strata/one": "one\n"})
	two := push(t, reg, "strata/os:two", "2", one.Img, map[string]string{"usr/share/strata/two": "two\n", "etc/motd": "two\n"})
	n := install(t, reg, one)
	repo := ostreeimage.Repo{Path: filepath.Join(n.sys.Sysroot, "ostree", "repo")}
	booted, ok, err := repo.Lookup(ctx, one.Digest)
	if err != nil || !ok {
		t.Fatalf("the booted image is not in the repository: %v", err)
	}
	before := n.commitObjects()

	start := time.Now()
	n.mustBootc("switch", two.Ref)
	t.Logf("switch to the derived image: %s", time.Since(start))

	staged, ok, err := repo.Lookup(ctx, two.Digest)
	if err != nil || !ok {
		t.Fatalf("the staged image is not in the repository: %v", err)
	}
	if len(staged.Layers) != len(booted.Layers)+1 || !slices.Equal(staged.Layers[:len(booted.Layers)], booted.Layers) {
		t.Errorf("layer commits of the derived image %q, want the booted image's %q and one more", staged.Layers, booted.Layers)
	}
	var added []string
	for _, c := range n.commitObjects() {
		if !slices.Contains(before, c) {
			added = append(added, c)
		}
	}
	slices.Sort(added)
	want := []string{staged.Checksum, staged.Layers[len(staged.Layers)-1]}
	slices.Sort(want)
	if !slices.Equal(added, want) {
		t.Errorf("the switch committed %q, want only the new layer and the image (%q)", added, want)
	}
	if d := n.deployments()[0]; !d.Staged || d.Checksum != staged.Checksum {
		t.Errorf("staged deployment %+v, want commit %s", d, staged.Checksum)
	}
	if got := readFile(t, filepath.Join(n.deployments()[0].Dir, "usr", "share", "strata", "one")); got != "one\n" {
		t.Errorf("the derived image's tree lacks the base's file: %q", got)
	}
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestDownloadOnlyLocksTheStagedDeployment: switch --download-only
// stages with ostree's finalization lock, created before ostree stages
// (no moment with an unlocked staged deployment of the image);
// --from-downloaded removes it; a plain switch stages unlocked.
func TestDownloadOnlyLocksTheStagedDeployment(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "s3cret")
	base := baseImage(t)
	one := push(t, reg, "strata/os:one", "1", base, map[string]string{"etc/motd": "one\n"})
	two := push(t, reg, "strata/os:two", "2", one.Img, map[string]string{"etc/motd": "two\n"})
	three := push(t, reg, "strata/os:three", "3", base, map[string]string{"etc/motd": "three\n"})
	four := push(t, reg, "strata/os:four", "4", base, map[string]string{"etc/motd": "four\n"})
	n := install(t, reg, one)
	lock := filepath.Join(n.sys.Run, "ostree", "staged-deployment-locked")
	// ostree, recording whether the lock exists when a deployment is
	// made, and failing deployments of commits listed in fail.
	log, fail := filepath.Join(n.root, "deploys"), filepath.Join(n.root, "fail")
	n.sys.Ostree = []string{"sh", "-c", `case "$*" in *"admin deploy"*)
		if test -e ` + lock + `; then echo locked; else echo unlocked; fi >>` + log + `
		for a; do grep -qx -- "$a" ` + fail + ` 2>/dev/null && exit 1; done;;
	esac
	exec ostree "$@"`, "ostree"}
	deploys := func() string {
		data, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		_ = os.Remove(log)
		return strings.TrimSpace(string(data))
	}
	downloadOnly := func(want bool) {
		t.Helper()
		h := n.status()
		if h.Status.Staged == nil || h.Status.Staged.DownloadOnly != want || h.Status.Booted.DownloadOnly {
			t.Fatalf("staged %+v, want downloadOnly %v", h.Status.Staged, want)
		}
		if exists(t, lock) != want {
			t.Fatalf("lock file exists: %v, want %v", !want, want)
		}
	}

	out := n.mustBootc("switch", "--download-only", "--transport", "registry", "--", two.Ref)
	if !strings.Contains(out, "locked") {
		t.Errorf("switch --download-only output: %q", out)
	}
	if got := deploys(); got != "locked" {
		t.Errorf("ostree admin deploy ran with the lock: %q, want locked", got)
	}
	downloadOnly(true)
	if h := n.status(); h.Status.Staged.Digest() != two.Digest || h.Spec.Image.Image != two.Ref {
		t.Fatalf("staged %s, spec %+v", h.Status.Staged.Digest(), h.Spec.Image)
	}
	// Again: unchanged, still locked, nothing deployed.
	if out := n.mustBootc("switch", "--download-only", two.Ref); !strings.Contains(out, "Image specification is unchanged.") {
		t.Errorf("second switch --download-only: %q", out)
	}
	if got := deploys(); got != "" {
		t.Errorf("an unchanged switch deployed: %q", got)
	}
	downloadOnly(true)

	// The daemon's unlock, then its lock of a bootc 1.16 (upgrade).
	n.mustBootc("upgrade", "--from-downloaded")
	downloadOnly(false)
	if out := n.mustBootc("upgrade", "--from-downloaded"); !strings.Contains(out, "already unlocked") {
		t.Errorf("unlocking twice: %q", out)
	}
	n.mustBootc("upgrade", "--download-only")
	downloadOnly(true)
	// switch --from-downloaded: the target must be the staged image.
	if code, _, errOut := n.bootc("switch", "--from-downloaded", three.Ref); code != 1 || !strings.Contains(errOut, "the staged deployment is "+two.Ref) {
		t.Errorf("switch --from-downloaded to another image: exit %d, %q", code, errOut)
	}
	downloadOnly(true)
	n.mustBootc("switch", "--from-downloaded", two.Ref)
	downloadOnly(false)
	// A download-only switch to the image staged unlocked locks it.
	n.mustBootc("switch", "--download-only", two.Ref)
	downloadOnly(true)
	n.mustBootc("switch", "--from-downloaded")
	downloadOnly(false)
	n.mustBootc("upgrade", "--download-only")

	// A plain switch replaces the locked deployment by an unlocked one.
	n.mustBootc("switch", three.Ref)
	if got := deploys(); got != "unlocked" {
		t.Errorf("a plain switch deployed with the lock: %q", got)
	}
	downloadOnly(false)

	// A download-only switch that fails leaves no lock behind.
	if err := os.WriteFile(fail, []byte(four.Digest+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	im, err := ostreeimage.Repo{Path: filepath.Join(n.sys.Sysroot, "ostree", "repo")}.Import(context.Background(), four.Img)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fail, []byte(im.Checksum+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := n.bootc("switch", "--download-only", four.Ref); code != 1 || !strings.Contains(errOut, "ostree admin deploy") {
		t.Fatalf("failing switch --download-only: exit %d, %q", code, errOut)
	}
	if got := deploys(); got != "locked" {
		t.Errorf("the failed deployment ran with the lock: %q", got)
	}
	if exists(t, lock) {
		t.Error("a failed switch --download-only left the lock")
	}

	// Rollback drops a locked staged deployment and its lock.
	_ = os.Remove(fail)
	n.mustBootc("switch", "--download-only", four.Ref)
	n.boot()
	n.mustBootc("switch", "--download-only", two.Ref)
	downloadOnly(true)
	n.mustBootc("rollback")
	if h := n.status(); h.Status.Staged != nil || exists(t, lock) {
		t.Errorf("after rollback: staged %+v, lock %v", h.Status.Staged, exists(t, lock))
	}
}

// TestStatusOfAnImageCommitWithoutConfiguration: a boot disk whose image
// commit another importer made (ref and ostree.manifest-digest, no image
// configuration) still reports the booted digest.
func TestStatusOfAnImageCommitWithoutConfiguration(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start(t, "")
	one := push(t, reg, "strata/os:one", "1", baseImage(t), nil)
	n := install(t, reg, one)
	booted := n.deployments()[0]
	repo := filepath.Join(n.sys.Sysroot, "ostree", "repo")
	// The same tree, committed as a flat importer commits it.
	ostree(t, "commit", "--repo="+repo, "--branch="+ostreeimage.ImageRef(one.Digest), "--tree=ref="+booted.Checksum,
		"--add-metadata-string="+ostreeimage.MetaManifestDigest+"="+one.Digest)
	ostree(t, "admin", "deploy", "--sysroot="+n.sys.Sysroot, "--os="+stateroot, "--retain", ostreeimage.ImageRef(one.Digest))
	origin := n.deployments()[0].Dir + ".origin"
	if err := os.WriteFile(origin, []byte(ostreeimage.Origin{Image: one.Ref}.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	n.boot()
	h := n.status()
	if b := h.Status.Booted; b.Digest() != one.Digest || b.Ostree.Checksum == booted.Checksum || b.Image.Version != "" {
		t.Errorf("booted %+v %+v, want digest %s from the ref of the other commit", b.Image, b.Ostree, one.Digest)
	}
}
