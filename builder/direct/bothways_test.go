package direct

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
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/test/testhost"
	"github.com/strata-dev/strata/test/testregistry"
)

// buildahVersionLabel is the label buildah puts on every image it
// commits. The single-Job image always has it; the direct image has it
// only when its base (the admin stage) was built by buildah. It says which
// tool made the image, not what the image is, so the configs are compared
// without it.
const buildahVersionLabel = "io.buildah.version"

// Ignition fragments the cases combine.
const (
	bwFiles = `"files":[
	    {"path":"/etc/strata/secret","mode":384,"user":{"id":1000},"group":{"id":1000},"contents":{"source":"data:,s3cret"}},
	    {"path":"/etc/strata/deep/er/still/conf.d/x.conf","contents":{"source":"data:,deep%0A"}},
	    {"path":"/usr/libexec/strata-tool","mode":2541,"contents":{"source":"data:,%23!%2Fbin%2Fsh%0A"}},
	    {"path":"/etc/NetworkManager/system-connections/eth0.nmconnection","mode":384,"contents":{"source":"data:,%5Bconnection%5D%0A"}},
	    {"path":"/etc/polkit-1/rules.d/50-strata.rules","contents":{"source":"data:,rules"}},
	    {"path":"/etc/sudoers.d/strata","mode":288,"contents":{"source":"data:,core%20ALL=(ALL)%20NOPASSWD:%20ALL%0A"}},
	    {"path":"/etc/ssl/certs/strata-ca.pem","contents":{"source":"data:,pem"}},
	    {"path":"/etc/abs-certs/strata-other.pem","contents":{"source":"data:,pem2"}},
	    {"path":"/etc/link.d/y.conf","contents":{"source":"data:,y"}},
	    {"path":"/etc/issue","contents":{"source":"data:,Strata%0A"}},
	    {"path":"/var/lib/strata-test/node-only","contents":{"source":"data:,v"}}],
	  "directories":[
	    {"path":"/etc/strata","mode":488,"group":{"id":1000}},
	    {"path":"/etc/strata/empty.d","mode":457},
	    {"path":"/etc/link.d","mode":488}],
	  "links":[
	    {"path":"/etc/strata/link","target":"secret"},
	    {"path":"/etc/strata-abs","target":"/etc/strata/secret"},
	    {"path":"/usr/libexec/strata-tool-hard","target":"/usr/libexec/strata-tool","hard":true},
	    {"path":"/usr/libexec/a-hard","target":"/usr/libexec/strata-tool","hard":true}]`
	bwUnits = `"units":[
	  {"name":"strata.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
	  {"name":"masked.service","mask":true}]`
	bwKargs = `"kernelArguments":{"shouldExist":["quiet"]}`
	// bwAdmin runs on the base in the admin stage and after the
	// configuration in the single Job: what it writes must not depend on
	// the configuration. It sets a directory's mode, as a package install
	// does, under which the configuration writes a file.
	bwAdmin = "RUN echo admin > /etc/admin-stamp && mkdir -p /etc/admin.d && chmod 0700 /etc/admin.d\n"
	// bwIntoAdmin is a file the configuration writes into bwAdmin's
	// directory.
	bwIntoAdmin = `{"path":"/etc/admin.d/from-config","contents":{"source":"data:,c"}}`
)

// TestBothWays builds the same inputs with the single-Job strategy (one
// buildah build of Result.Containerfile) and with the ConfigLayer strategy
// (buildah builds the admin stage, if any, and Build appends the
// configuration layer), and compares the two images: the file trees
// (paths, types, modes, owners, link targets, contents, xattrs; not
// times) and the image configs. The base has what real bases have on the
// paths configurations write: directories whose modes and owners are not
// 0755 root's (/etc/NetworkManager/system-connections, /etc/sudoers.d,
// /etc/polkit-1/rules.d) and symlinked directories (/etc/ssl/certs). No
// configuration has extensions or a kernel type: they need dnf, which
// busybox lacks, and they only change the admin stage, which both ways
// build with buildah.
func TestBothWays(t *testing.T) {
	bh := newBuildah(t)
	reg := testregistry.Start(t, "")
	base := reg.Push(t, "strata/base:latest", bothWaysBase(t))
	baseCF, err := pulled(t, reg, base).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		// ignition is the Ignition config's top-level keys after the
		// version.
		ignition string
		// kargs are spec.kernelArguments.
		kargs   []string
		content string
		// present are paths both images must have, so that the comparison
		// is not of two empty trees.
		present []string
		// admin says whether the render has an admin stage.
		admin bool
	}{{
		name:     "files-dirs-links",
		ignition: `"storage":{` + bwFiles + `}`,
		present: []string{"etc/strata/secret", "etc/strata/deep/er/still/conf.d/x.conf", "etc/strata/empty.d", "etc/strata/link",
			"usr/libexec/a-hard", "etc/NetworkManager/system-connections/eth0.nmconnection", "etc/polkit-1/rules.d/50-strata.rules",
			"etc/pki/tls/certs/strata-ca.pem", "etc/pki/tls/certs/strata-other.pem", "etc/link.d/y.conf"},
	}, {
		name:     "units-kargs",
		ignition: `"systemd":{` + bwUnits + `},` + bwKargs,
		kargs:    []string{"nosmt", "console=ttyS0,115200"},
		present: []string{"etc/systemd/system/multi-user.target.wants/strata.service", "etc/systemd/system/masked.service",
			"usr/lib/bootc/kargs.d/10-strata.toml"},
	}, {
		name: "everything-with-containerfile",
		ignition: `"storage":{` + strings.Replace(bwFiles, `"files":[`, `"files":[`+bwIntoAdmin+",", 1) + `},` +
			`"systemd":{` + bwUnits + `},` + bwKargs,
		kargs:   []string{"nosmt"},
		content: bwAdmin,
		present: []string{"etc/admin-stamp", "etc/admin.d/from-config", "etc/strata/secret", "etc/systemd/system/masked.service",
			"usr/lib/bootc/kargs.d/10-strata.toml"},
		admin: true,
	}, {
		name:     "containerfile-only",
		ignition: `"storage":{"files":[{"path":"/var/lib/strata-test/node-only","contents":{"source":"data:,v"}}]}`,
		content:  bwAdmin,
		present:  []string{"etc/admin-stamp", "etc/admin.d"},
		admin:    true,
	}} {
		t.Run(c.name, func(t *testing.T) {
			in := containerfile.Input{
				ConfigName: "rendered-worker-" + c.name, Pool: "worker", Arch: "amd64", BaseImage: base,
				Spec: &v1alpha1.MachineConfigSpec{
					Config:          runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.5.0"},` + c.ignition + `}`)},
					KernelArguments: c.kargs,
				},
			}
			if c.content != "" {
				in.Containerfiles = []v1alpha1.MachineOSContainerfile{{Content: c.content}}
			}
			res, err := containerfile.Render(in)
			if err != nil {
				t.Fatal(err)
			}
			st := res.Stages
			if st.NeedsJob != "" {
				t.Fatalf("the configuration needs a Job (%s): it cannot be built as a layer", st.NeedsJob)
			}
			if (st.Admin != nil) != c.admin {
				t.Fatalf("admin stage %v, want %v", st.Admin != nil, c.admin)
			}

			single := bh.build(t, res, reg.Host+"/strata/single-"+c.name+":1")

			adminImage := base
			if st.Admin != nil {
				adminImage = bh.build(t, st.Admin, reg.Host+"/strata/admin-"+c.name+":1")
			}
			layer := st.Layer
			if layer == nil {
				// As the controller does: only /var-bound items.
				layer = emptyTar(t)
			}
			rec := &recorder{}
			req := Request{
				Base:      adminImage,
				Platform:  v1.Platform{OS: "linux", Architecture: "amd64"},
				Layer:     layer,
				Labels:    res.Labels,
				CreatedBy: "strata: configuration of " + in.ConfigName,
				Target:    reg.Host + "/strata/direct-" + c.name + ":1",
				Insecure:  []string{reg.Host},
				Cache:     NewBaseCache(2),
				Transport: rec,
			}
			first, err := Build(context.Background(), req)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			baseLayers, _ := layerDigests(t, pulled(t, reg, adminImage))
			rec.reset()
			second, err := Build(context.Background(), req)
			if err != nil {
				t.Fatalf("Build again: %v", err)
			}
			if first.Digest != second.Digest {
				t.Errorf("two direct builds of one input gave %s and %s", first.Digest, second.Digest)
			}
			// What the first build learnt of the base is enough for the next.
			if gets := rec.calls(blobCalls("GET", reg.Host, baseLayers)); len(gets) != 0 {
				t.Errorf("the second build read the base's layers again: %+v", gets)
			}

			singleImg, directImg := pulled(t, reg, single), pulled(t, reg, first.Image)
			singleTree, directTree := flatTree(t, singleImg), flatTree(t, directImg)
			if d := diffTrees(singleTree, directTree); d != "" {
				t.Errorf("file trees differ (single-Job %s, direct %s):\n%s", single, first.Image, d)
			}
			for _, p := range c.present {
				if _, ok := directTree[p]; !ok {
					t.Errorf("%s is not in the direct image", p)
				}
				if _, ok := singleTree[p]; !ok {
					t.Errorf("%s is not in the single-Job image", p)
				}
			}
			for _, tree := range []map[string]node{singleTree, directTree} {
				for p := range tree {
					if strings.HasPrefix(p, "var/lib/strata") {
						t.Errorf("%s is in an image: /var belongs to the node", p)
					}
				}
			}

			want := baseCF.Config.DeepCopy()
			maps.Copy(want.Labels, res.Labels)
			if d := diffConfigs(want, singleImg, directImg); d != "" {
				t.Errorf("image configs differ:\n%s", d)
			}

			checkConfigLayer(t, directImg, first.Layer)
		})
	}
}

// bothWaysBase is busybox with what real bases have on the paths a
// configuration writes: directories whose modes and owners are not 0755
// root's, symlinked directories (relative, absolute, a link to a link) and
// a symlinked file; labels as a bootc base has them, an environment, an
// entrypoint and a command.
func bothWaysBase(t *testing.T) v1.Image {
	t.Helper()
	dirs := tarOf(t, []tar.Header{
		{Typeflag: tar.TypeDir, Name: "etc/NetworkManager/", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: "etc/NetworkManager/system-connections/", Mode: 0o700},
		{Typeflag: tar.TypeDir, Name: "etc/polkit-1/", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: "etc/polkit-1/rules.d/", Mode: 0o700, Uid: 999},
		{Typeflag: tar.TypeDir, Name: "etc/sudoers.d/", Mode: 0o750},
		{Typeflag: tar.TypeDir, Name: "etc/pki/", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: "etc/pki/tls/", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: "etc/pki/tls/certs/", Mode: 0o751},
		{Typeflag: tar.TypeDir, Name: "etc/ssl/", Mode: 0o755},
		{Typeflag: tar.TypeSymlink, Name: "etc/ssl/certs", Linkname: "../pki/tls/certs", Mode: 0o777},
		{Typeflag: tar.TypeSymlink, Name: "etc/abs-certs", Linkname: "/etc/ssl/certs", Mode: 0o777},
		{Typeflag: tar.TypeDir, Name: "etc/real.d/", Mode: 0o700},
		{Typeflag: tar.TypeSymlink, Name: "etc/link.d", Linkname: "real.d", Mode: 0o777},
		{Typeflag: tar.TypeSymlink, Name: "etc/issue", Linkname: "motd", Mode: 0o777},
	})
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(dirs)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(testregistry.Busybox(t), layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config
	cfg.Labels = map[string]string{"containers.bootc": "1", "ostree.bootable": "true", "org.opencontainers.image.version": "base-1"}
	cfg.Env = append(cfg.Env, "STRATA_BASE=busybox")
	cfg.Entrypoint = []string{"/bin/busybox"}
	cfg.Cmd = []string{"sh", "-l"}
	img, err = mutate.Config(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func tarOf(t *testing.T, hs []tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func emptyTar(t *testing.T) []byte { return tarOf(t, nil) }

// buildahHost runs buildah with its own storage, shared by the test's
// builds so that the base is pulled once.
type buildahHost struct {
	bin, work string
	global    []string
}

func newBuildah(t *testing.T) *buildahHost {
	t.Helper()
	bin, err := exec.LookPath("buildah")
	if err != nil {
		t.Fatalf("buildah is not installed: this test needs it (apt-get install -y buildah): %v", err)
	}
	testhost.UseBuildah(t)
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	bh := &buildahHost{bin: bin, work: work,
		global: []string{"--root", filepath.Join(work, "root"), "--runroot", filepath.Join(work, "runroot"), "--storage-driver", "vfs"}}
	// Remove what buildah mounted or stored even when the test fails;
	// registered after UseBuildah's cleanup, so it runs before it.
	t.Cleanup(func() {
		for _, args := range [][]string{{"rm", "--all"}, {"rmi", "--all", "--force"}} {
			cmd := exec.Command(bin, append(slices.Clone(bh.global), args...)...)
			cmd.Env = bh.env()
			_ = cmd.Run()
		}
	})
	return bh
}

// env is the environment without variables that would configure buildah
// behind the test's back.
func (b *buildahHost) env() []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "TMPDIR=") || strings.HasPrefix(e, "CONTAINERS_") || strings.HasPrefix(e, "BUILDAH_") {
			continue
		}
		env = append(env, e)
	}
	return append(env, "TMPDIR="+filepath.Join(b.work, "tmp"))
}

func (b *buildahHost) run(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bin, append(slices.Clone(b.global), args...)...)
	cmd.Env = b.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// build builds a rendered context as the build Job's script does
// (--timestamp 0, --layers=false, chroot isolation), pushes it to target
// and returns it by digest.
func (b *buildahHost) build(t *testing.T, res *containerfile.Result, target string) string {
	t.Helper()
	dir, err := os.MkdirTemp(b.work, "context-")
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	iid := filepath.Join(dir, ".iid")
	b.run(t, "bud", "--isolation", "chroot", "--timestamp", "0", "--layers=false", "--tls-verify=false",
		"--iidfile", iid, "-f", filepath.Join(dir, containerfile.ContainerfileName), dir)
	id, err := os.ReadFile(iid)
	if err != nil {
		t.Fatal(err)
	}
	digestFile := filepath.Join(dir, ".digest")
	b.run(t, "push", "--tls-verify=false", "--digestfile", digestFile, strings.TrimSpace(string(id)), "docker://"+target)
	d, err := os.ReadFile(digestFile)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(target, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return ref.Context().Name() + "@" + strings.TrimSpace(string(d))
}

// node is one path of a flattened image, without its times. A hard link
// is the file it links to, and links names every path of its inode, so
// that which name a tool wrote first does not matter.
type node struct {
	typ              byte
	mode             int64
	uid, gid         int
	link             string
	size             int64
	sum              string
	devmajor, devmin int64
	xattrs           string
	links            string
}

func (n node) String() string {
	var s string
	switch n.typ {
	case tar.TypeDir:
		s = "dir"
	case tar.TypeReg:
		s = fmt.Sprintf("file %d bytes sha256:%s", n.size, n.sum)
	case tar.TypeSymlink:
		s = "symlink -> " + n.link
	default:
		s = fmt.Sprintf("type %q %d,%d", n.typ, n.devmajor, n.devmin)
	}
	s += fmt.Sprintf(" %04o %d:%d", n.mode, n.uid, n.gid)
	if n.xattrs != "" {
		s += " xattrs " + n.xattrs
	}
	if n.links != "" {
		s += " hard links " + n.links
	}
	return s
}

// flatTree is img's file system as mutate.Extract gives it (the layers
// applied in order, whiteouts processed), by path without a leading "./"
// or "/" or a trailing "/".
func flatTree(t *testing.T, img v1.Image) map[string]node {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tree := map[string]node{}
	hard := map[string]string{} // link → target
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := cleanName(h.Name)
		if p == "" {
			continue
		}
		if h.Typeflag == tar.TypeLink {
			hard[p] = cleanName(h.Linkname)
			continue
		}
		typ := h.Typeflag // tar.Reader reports the old TypeRegA as TypeReg
		n := node{typ: typ, mode: h.Mode & 0o7777, uid: h.Uid, gid: h.Gid, devmajor: h.Devmajor, devmin: h.Devminor}
		switch typ {
		case tar.TypeReg:
			s := sha256.New()
			size, err := io.Copy(s, tr)
			if err != nil {
				t.Fatal(err)
			}
			n.size, n.sum = size, hex.EncodeToString(s.Sum(nil))[:16]
		case tar.TypeSymlink:
			n.link = h.Linkname
		}
		var xs []string
		for k, v := range h.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") {
				xs = append(xs, strings.TrimPrefix(k, "SCHILY.xattr.")+"="+v)
			}
		}
		slices.Sort(xs)
		n.xattrs = strings.Join(xs, ",")
		tree[p] = n
	}
	groups := map[string][]string{} // target → every name of its inode
	for l, target := range hard {
		n, ok := tree[target]
		if !ok {
			t.Fatalf("hard link %s to %s, which the image does not have", l, target)
		}
		tree[l] = n
		if groups[target] == nil {
			groups[target] = []string{target}
		}
		groups[target] = append(groups[target], l)
	}
	for _, names := range groups {
		slices.Sort(names)
		for _, p := range names {
			n := tree[p]
			n.links = strings.Join(names, " ")
			tree[p] = n
		}
	}
	return tree
}

func cleanName(s string) string {
	return strings.Trim(strings.TrimPrefix(s, "./"), "/")
}

// diffTrees lists every path the two trees do not have alike, or "".
func diffTrees(single, direct map[string]node) string {
	paths := slices.Sorted(maps.Keys(single))
	for p := range direct {
		if _, ok := single[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var b strings.Builder
	for _, p := range paths {
		s, inSingle := single[p]
		d, inDirect := direct[p]
		switch {
		case !inDirect:
			fmt.Fprintf(&b, "  %s: only in the single-Job image: %s\n", p, s)
		case !inSingle:
			fmt.Fprintf(&b, "  %s: only in the direct image: %s\n", p, d)
		case s != d:
			fmt.Fprintf(&b, "  %s:\n    single-Job %s\n    direct     %s\n", p, s, d)
		}
	}
	return b.String()
}

// diffConfigs compares both images' configs, without buildah's version
// label, with want (the base's config with Strata's labels): the
// runtime config in full, the OS and the architecture. It ignores the
// creation time, the history and the rootfs.
func diffConfigs(want *v1.Config, imgs ...v1.Image) string {
	var b strings.Builder
	show := func(c any) string {
		j, _ := json.MarshalIndent(c, "    ", "  ")
		return string(j)
	}
	for i, img := range imgs {
		which := []string{"single-Job", "direct"}[i]
		cf, err := img.ConfigFile()
		if err != nil {
			fmt.Fprintf(&b, "  %s: %v\n", which, err)
			continue
		}
		got := cf.Config.DeepCopy()
		delete(got.Labels, buildahVersionLabel)
		if !reflect.DeepEqual(got, want) {
			fmt.Fprintf(&b, "  %s config:\n    %s\n  want:\n    %s\n", which, show(got), show(want))
		}
		if cf.OS != "linux" || cf.Architecture != "amd64" {
			fmt.Fprintf(&b, "  %s platform %s/%s, want linux/amd64\n", which, cf.OS, cf.Architecture)
		}
	}
	return b.String()
}

// checkConfigLayer checks the direct image's top layer: the configuration
// layer, with no entry under var/, a directory entry for every parent of
// every entry, and numeric owners only.
func checkConfigLayer(t *testing.T, img v1.Image, digest v1.Hash) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	top := layers[len(layers)-1]
	if d, err := top.Digest(); err != nil || d != digest {
		t.Fatalf("the top layer is %s (%v), not the configuration layer %s", d, err, digest)
	}
	rc, err := top.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	dirs := map[string]bool{}
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := cleanName(h.Name)
		names = append(names, p)
		if h.Typeflag == tar.TypeDir {
			dirs[p] = true
		}
		if p == "var" || strings.HasPrefix(p, "var/") {
			t.Errorf("the configuration layer has %s: /var belongs to the node", h.Name)
		}
		if h.Uname != "" || h.Gname != "" {
			t.Errorf("the configuration layer's %s has owner names %q:%q: an image resolves names with its own /etc/passwd", h.Name, h.Uname, h.Gname)
		}
	}
	for _, p := range names {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if !dirs[d] {
				t.Errorf("the configuration layer has %s but no entry for its parent %s", p, d)
			}
		}
	}
}
