package ostreeimage_test

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"

	"github.com/strata-dev/strata/ostreeimage"
	"github.com/strata-dev/strata/test/testregistry"
)

// newRepo is a new bare ostree repository, as a sysroot's is.
func newRepo(t testing.TB) ostreeimage.Repo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if out, err := exec.Command("ostree", "init", "--repo="+dir, "--mode=bare").CombinedOutput(); err != nil {
		t.Fatalf("ostree init: %v: %s", err, out)
	}
	return ostreeimage.Repo{Path: dir}
}

func ostree(t testing.TB, r ostreeimage.Repo, args ...string) string {
	t.Helper()
	out, err := exec.Command("ostree", append([]string{args[0], "--repo=" + r.Path}, args[1:]...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("ostree %s: %v: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("ostree %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// remoteImage pushes img and reads it back from the registry by digest,
// as a node pulls it.
func remoteImage(t testing.TB, reg *testregistry.Registry, repoTag string, img v1.Image) v1.Image {
	t.Helper()
	ref, err := name.ParseReference(reg.Push(t, repoTag, img), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref, remote.WithAuth(reg.Auth()))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

type entry struct {
	name     string
	typ      byte
	mode     int64
	uid, gid int
	data     string
	link     string
	pax      map[string]string
}

func layer(t testing.TB, entries ...entry) v1.Layer {
	t.Helper()
	return testregistry.TarLayer(t, func(tw *tar.Writer) error {
		for _, e := range entries {
			h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid,
				Linkname: e.link, Size: int64(len(e.data)), ModTime: time.Unix(0, 0), PAXRecords: e.pax}
			if e.typ != tar.TypeReg {
				h.Size = 0
			}
			if h.PAXRecords != nil {
				h.Format = tar.FormatPAX
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := io.WriteString(tw, e.data); err != nil {
				return err
			}
		}
		return nil
	})
}

func dir(name string, mode int64) entry { return entry{name: name, typ: tar.TypeDir, mode: mode} }
func file(name, data string) entry {
	return entry{name: name, typ: tar.TypeReg, mode: 0o644, data: data}
}

// appLayer is a layer with what an import must keep: owners, modes
// (setuid, a private directory), a symlink, a hard link, an extended
// attribute, /etc, kernel arguments for this and another architecture.
func appLayer(t testing.TB) v1.Layer {
	return layer(t,
		dir("opt/", 0o755),
		entry{name: "opt/app/", typ: tar.TypeDir, mode: 0o750, uid: 1000, gid: 1000},
		entry{name: "opt/app/bin", typ: tar.TypeReg, mode: 0o4755, data: "#!/bin/sh\necho app\n"},
		entry{name: "opt/app/link", typ: tar.TypeSymlink, mode: 0o777, link: "bin"},
		entry{name: "opt/app/hard", typ: tar.TypeLink, link: "opt/app/bin"},
		entry{name: "opt/app/attr", typ: tar.TypeReg, mode: 0o640, uid: 1000, data: "x",
			pax: map[string]string{"SCHILY.xattr.user.strata": "yes"}},
		entry{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		dir("etc/", 0o755),
		entry{name: "etc/app.conf", typ: tar.TypeReg, mode: 0o600, uid: 1000, gid: 1000, data: "level=1\n"},
		dir("usr/", 0o755), dir("usr/lib/", 0o755), dir("usr/lib/bootc/", 0o755), dir("usr/lib/bootc/kargs.d/", 0o755),
		file("usr/lib/bootc/kargs.d/10-app.toml", "kargs = [\"quiet\", \"app=1\"]\n"),
		file("usr/lib/bootc/kargs.d/20-other.toml", "kargs = [\"never\"]\nmatch-architectures = [\"no-such-arch\"]\n"),
	)
}

// flatImage is img as one layer, its flattened filesystem: what
// unpacking all its layers in order gives.
func flatImage(t testing.TB, img v1.Image) v1.Image {
	t.Helper()
	var entries []entry
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, entry{name: h.Name, typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid,
			data: string(data), link: h.Linkname, pax: h.PAXRecords})
	}
	// mutate.Extract lists upper layers first; a hard link must come
	// after its target.
	slices.SortStableFunc(entries, func(a, b entry) int {
		return boolInt(a.typ == tar.TypeLink) - boolInt(b.typ == tar.TypeLink)
	})
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.RootFS.DiffIDs = nil
	flat, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		t.Fatal(err)
	}
	flat, err = mutate.AppendLayers(flat, layer(t, entries...))
	if err != nil {
		t.Fatal(err)
	}
	return flat
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// contentChecksum is the checksum of a commit's root tree (content and
// metadata of every file and directory), without the commit's own
// metadata.
func contentChecksum(t testing.TB, r ostreeimage.Repo, csum string) string {
	t.Helper()
	f := strings.Fields(ostree(t, r, "ls", "-d", "-C", csum, "/"))
	if len(f) < 7 {
		t.Fatalf("ostree ls -d -C: %q", f)
	}
	return f[4] + " " + f[5]
}

func commitObjects(t testing.TB, r ostreeimage.Repo) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(r.Path, "objects"), func(p string, d fs.DirEntry, err error) error {
		if strings.HasSuffix(p, ".commit") {
			out = append(out, filepath.Base(filepath.Dir(p))+strings.TrimSuffix(d.Name(), ".commit"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkout(t testing.TB, r ostreeimage.Repo, csum string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "co")
	ostree(t, r, "checkout", "-H", csum, dst)
	return dst
}

type fileInfo struct {
	mode     fs.FileMode
	uid, gid uint32
	content  string // sha256 of a file, target of a symlink
	xattrs   string
	ino      uint64
}

// walk describes every path of a checked-out tree.
func walk(t testing.TB, root string) map[string]fileInfo {
	t.Helper()
	out := map[string]fileInfo{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		info := fileInfo{mode: fi.Mode(), uid: st.Uid, gid: st.Gid, ino: st.Ino}
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			info.content = hex.EncodeToString(sum[:])
		case fi.Mode()&fs.ModeSymlink != 0:
			info.content, err = os.Readlink(p)
			if err != nil {
				return err
			}
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			buf := make([]byte, 4096)
			n, err := unix.Llistxattr(p, buf)
			if err != nil {
				return err
			}
			names := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
			slices.Sort(names)
			for _, xn := range names {
				if xn == "" {
					continue
				}
				v := make([]byte, 4096)
				m, err := unix.Lgetxattr(p, xn, v)
				if err != nil {
					return err
				}
				info.xattrs += xn + "=" + string(v[:m]) + ";"
			}
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = info
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// appImages are busybox with appLayer (the base) and the base with a
// layer of files added (derived).
func appImages(t testing.TB, files map[string]string) (base, derived v1.Image) {
	t.Helper()
	base, err := mutate.AppendLayers(testregistry.Busybox(t), appLayer(t))
	if err != nil {
		t.Fatal(err)
	}
	derived, err = mutate.AppendLayers(base, testregistry.FilesLayer(t, files))
	if err != nil {
		t.Fatal(err)
	}
	return base, derived
}

func TestImportDerivedImageReusesBaseLayers(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	base, derived := appImages(t, map[string]string{
		"etc/app.conf":                          "level=2\n",
		"opt/app/new":                           "new\n",
		"usr/lib/bootc/kargs.d/30-derived.toml": "kargs = [\"derived\"]\n",
	})
	derived, err := mutate.Config(derived, v1.Config{Labels: map[string]string{"org.opencontainers.image.version": "2.0"}})
	if err != nil {
		t.Fatal(err)
	}
	baseImg := remoteImage(t, reg, "os:base", base)
	derivedImg := remoteImage(t, reg, "os:derived", derived)

	r := newRepo(t)
	b, err := r.Import(ctx, baseImg)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Layers) != 2 || b.Flattened {
		t.Fatalf("base: %d layer commits, flattened %v; want 2, false", len(b.Layers), b.Flattened)
	}
	if want := []string{"quiet", "app=1"}; !slices.Equal(b.Kargs, want) {
		t.Errorf("base kargs %q, want %q", b.Kargs, want)
	}
	before := commitObjects(t, r)

	d, err := r.Import(ctx, derivedImg)
	if err != nil {
		t.Fatal(err)
	}
	if d.Flattened {
		t.Error("the derived image was flattened; it deletes nothing")
	}
	if !slices.Equal(d.Layers[:2], b.Layers) {
		t.Errorf("derived layer commits %q do not start with the base's %q", d.Layers, b.Layers)
	}
	// Only the new layer and the image were committed.
	var added []string
	for _, c := range commitObjects(t, r) {
		if !slices.Contains(before, c) {
			added = append(added, c)
		}
	}
	slices.Sort(added)
	want := []string{d.Checksum, d.Layers[2]}
	slices.Sort(want)
	if !slices.Equal(added, want) {
		t.Errorf("the derived import added commits %q, want the new layer's and the image's %q", added, want)
	}
	for i, diffID := range diffIDs(t, baseImg) {
		csum := strings.TrimSpace(ostree(t, r, "rev-parse", ostreeimage.LayerRef(diffID)))
		if csum != b.Layers[i] {
			t.Errorf("layer ref %s moved from %s to %s", diffID, b.Layers[i], csum)
		}
	}
	if want := []string{"quiet", "app=1", "derived"}; !slices.Equal(d.Kargs, want) {
		t.Errorf("derived kargs %q, want %q", d.Kargs, want)
	}
	if d.Version != "2.0" || d.Architecture != "amd64" {
		t.Errorf("derived version %q, architecture %q", d.Version, d.Architecture)
	}
	if got := strings.TrimSpace(ostree(t, r, "show", "--print-metadata-key="+ostreeimage.MetaManifestDigest, d.Checksum)); got != "'"+d.Digest+"'" {
		t.Errorf("%s = %s, want %s", ostreeimage.MetaManifestDigest, got, d.Digest)
	}

	// The merged tree is the flattened image's tree.
	flatRepo := newRepo(t)
	flat, err := flatRepo.Import(ctx, remoteImage(t, reg, "os:flat", flatImage(t, derived)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := contentChecksum(t, r, d.Checksum), contentChecksum(t, flatRepo, flat.Checksum); got != want {
		t.Errorf("merged tree %s, flattened tree %s", got, want)
	}

	tree := walk(t, checkout(t, r, d.Checksum))
	for p, want := range map[string]fileInfo{
		"opt/app":      {mode: fs.ModeDir | 0o755},
		"opt/app/bin":  {mode: 0o755 | fs.ModeSetuid},
		"opt/app/link": {mode: fs.ModeSymlink | 0o777, content: "bin"},
		"opt/app/attr": {mode: 0o640, uid: 1000, xattrs: "user.strata=yes;"},
		// /etc moved to /usr/etc, the derived layer's file won.
		"usr/etc/app.conf": {mode: 0o644},
		"usr/etc/motd":     {mode: 0o644},
	} {
		got, ok := tree[p]
		if !ok {
			t.Errorf("%s missing", p)
			continue
		}
		if got.mode != want.mode || got.uid != want.uid || (want.content != "" && got.content != want.content) || got.xattrs != want.xattrs {
			t.Errorf("%s: %+v, want %+v", p, got, want)
		}
	}
	if tree["opt/app/hard"].ino != tree["opt/app/bin"].ino {
		t.Error("opt/app/hard is not a hard link of opt/app/bin")
	}
	for _, p := range []string{"etc", "dev/null"} {
		if _, ok := tree[p]; ok {
			t.Errorf("%s is in the tree", p)
		}
	}
}

func diffIDs(t testing.TB, img v1.Image) []string {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range cfg.RootFS.DiffIDs {
		out = append(out, d.String())
	}
	return out
}

func TestImportWhiteoutsFallBackToFlattenedTree(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	base, err := mutate.AppendLayers(testregistry.Busybox(t), layer(t,
		dir("opt/", 0o755), dir("opt/keep/", 0o755), file("opt/keep/a", "a"), file("opt/keep/b", "b"),
		dir("opt/opaque/", 0o755), file("opt/opaque/old", "old")))
	if err != nil {
		t.Fatal(err)
	}
	upper, err := mutate.AppendLayers(base, layer(t,
		dir("etc/", 0o755), file("etc/.wh.motd", ""),
		dir("opt/", 0o755), dir("opt/keep/", 0o755), file("opt/keep/.wh.a", ""),
		dir("opt/opaque/", 0o700), file("opt/opaque/.wh..wh..opq", ""), file("opt/opaque/new", "new")))
	if err != nil {
		t.Fatal(err)
	}
	r := newRepo(t)
	b, err := r.Import(ctx, remoteImage(t, reg, "os:base", base))
	if err != nil {
		t.Fatal(err)
	}
	im, err := r.Import(ctx, remoteImage(t, reg, "os:upper", upper))
	if err != nil {
		t.Fatal(err)
	}
	if !im.Flattened {
		t.Error("an image deleting files was merged, not flattened")
	}
	if !slices.Equal(im.Layers[:2], b.Layers) {
		t.Errorf("layer commits %q do not start with the base's %q", im.Layers, b.Layers)
	}
	tree := walk(t, checkout(t, r, im.Checksum))
	for _, p := range []string{"usr/etc/motd", "opt/keep/a", "opt/opaque/old"} {
		if _, ok := tree[p]; ok {
			t.Errorf("%s was deleted by a whiteout and is in the tree", p)
		}
	}
	for _, p := range []string{"usr/etc/passwd", "opt/keep/b", "opt/opaque/new"} {
		if _, ok := tree[p]; !ok {
			t.Errorf("%s is missing", p)
		}
	}
	if got := tree["opt/opaque"].mode; got != fs.ModeDir|0o700 {
		t.Errorf("opt/opaque mode %v, want the upper layer's drwx------", got)
	}
	for p := range tree {
		if strings.Contains(p, ".wh.") {
			t.Errorf("whiteout %s is in the tree", p)
		}
	}
	// The layer commit keeps its whiteouts, as ostree-ext's does.
	if out := ostree(t, r, "ls", im.Layers[2], "/opt/keep"); !strings.Contains(out, "/opt/keep/.wh.a") {
		t.Errorf("the layer commit has no whiteout:\n%s", out)
	}
}

func TestImportIsReproducible(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	img, err := mutate.AppendLayers(testregistry.Busybox(t), appLayer(t))
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	pulled := remoteImage(t, reg, "os:1", img)
	r1, r2 := newRepo(t), newRepo(t)
	a, err := r1.Import(ctx, pulled)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r2.Import(ctx, pulled)
	if err != nil {
		t.Fatal(err)
	}
	if a.Checksum != b.Checksum || !slices.Equal(a.Layers, b.Layers) {
		t.Errorf("two imports: %s %q and %s %q", a.Checksum, a.Layers, b.Checksum, b.Layers)
	}
	commits := commitObjects(t, r1)
	again, err := r1.Import(ctx, pulled)
	if err != nil {
		t.Fatal(err)
	}
	if again.Checksum != a.Checksum || len(commitObjects(t, r1)) != len(commits) {
		t.Errorf("importing again: %s, %d commits; want %s, %d", again.Checksum, len(commitObjects(t, r1)), a.Checksum, len(commits))
	}
	found, ok, err := r1.Lookup(ctx, a.Digest)
	if err != nil || !ok {
		t.Fatalf("Lookup: %v, %v", ok, err)
	}
	if found.Checksum != a.Checksum || found.Created != "2026-01-02T03:04:05Z" || found.Architecture != "amd64" ||
		!slices.Equal(found.Kargs, a.Kargs) || !slices.Equal(found.Layers, a.Layers) || found.Flattened {
		t.Errorf("Lookup: %+v, imported %+v", found, a)
	}
	if _, ok, err := r1.Lookup(ctx, "sha256:"+strings.Repeat("0", 64)); ok || err != nil {
		t.Errorf("Lookup of an unknown image: %v, %v", ok, err)
	}

	// Removing the unused drops the image and layer refs, keeps the kept.
	if err := r1.RemoveUnused(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if out := ostree(t, r1, "refs"); strings.TrimSpace(out) != "" {
		t.Errorf("refs left: %s", out)
	}
	if err := r2.RemoveUnused(ctx, []string{b.Digest}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(ostree(t, r2, "refs")); len(got) != 3 {
		t.Errorf("refs kept: %q, want the image's and its 2 layers'", got)
	}
}

func TestImportRejectsEtcAndUsrEtc(t *testing.T) {
	reg := testregistry.Start(t, "")
	img, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, map[string]string{"usr/etc/x": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = newRepo(t).Import(context.Background(), remoteImage(t, reg, "os:bad", img))
	if err == nil || !strings.Contains(err.Error(), "/usr/etc") {
		t.Fatalf("Import: %v, want an error about /etc and /usr/etc", err)
	}
}

// TestImportFileReplacingDirectory: an upper layer's file replaces a lower
// layer's directory and a directory a file, which a merge of trees refuses.
func TestImportFileReplacingDirectory(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	base, err := mutate.AppendLayers(testregistry.Busybox(t), layer(t,
		dir("opt/", 0o755), dir("opt/x/", 0o755), file("opt/x/a", "a"), file("opt/y", "y")))
	if err != nil {
		t.Fatal(err)
	}
	upper, err := mutate.AppendLayers(base, layer(t,
		dir("opt/", 0o755), file("opt/x", "now a file"), dir("opt/y/", 0o700), file("opt/y/b", "b")))
	if err != nil {
		t.Fatal(err)
	}
	r := newRepo(t)
	im, err := r.Import(ctx, remoteImage(t, reg, "os:upper", upper))
	if err != nil {
		t.Fatal(err)
	}
	if !im.Flattened {
		t.Error("merged; ostree's merge cannot replace a directory by a file, the import must fall back to the flattened tree")
	}
	tree := walk(t, checkout(t, r, im.Checksum))
	if got := tree["opt/x"].mode; !got.IsRegular() {
		t.Errorf("opt/x is %v, want the upper layer's file", got)
	}
	if _, ok := tree["opt/x/a"]; ok {
		t.Error("opt/x/a of the lower directory is in the tree")
	}
	if got := tree["opt/y"].mode; got != fs.ModeDir|0o700 {
		t.Errorf("opt/y is %v, want the upper layer's directory", got)
	}
	if _, ok := tree["opt/y/b"]; !ok {
		t.Error("opt/y/b is missing")
	}
}
