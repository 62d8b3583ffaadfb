package direct

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// treeBase is an image of the given layers, bottom first.
func treeBase(t *testing.T, layers ...[]tar.Header) v1.Image {
	t.Helper()
	img := empty.Image
	for _, hs := range layers {
		data := tarOf(t, hs)
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// listing is a tar's entries, one line each: name, type, mode, owner,
// link target.
func listing(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s %c %04o %d:%d", h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid)
		if h.Linkname != "" {
			line += " -> " + h.Linkname
		}
		for k, v := range h.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") {
				line += " " + strings.TrimPrefix(k, "SCHILY.xattr.") + "=" + v
			}
		}
		out = append(out, line)
	}
}

func TestCompleteLayer(t *testing.T) {
	dir := func(name string, mode int64, owner ...int) tar.Header {
		h := tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}
		if len(owner) == 2 {
			h.Uid, h.Gid = owner[0], owner[1]
		}
		return h
	}
	file := func(name string) tar.Header { return tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644} }
	link := func(name, target string) tar.Header {
		return tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}
	}
	xattr := dir("etc/selinux.d/", 0o750)
	xattr.PAXRecords = map[string]string{"SCHILY.xattr.user.strata": "kept"}
	xattr.Format = tar.FormatPAX
	base := treeBase(t,
		[]tar.Header{
			dir("etc/", 0o755), dir("etc/secret.d/", 0o700, 999, 0), xattr, dir("etc/gone.d/", 0o700), dir("etc/opaque.d/", 0o755),
			dir("etc/opaque.d/old/", 0o700), dir("usr/", 0o755), dir("usr/lib/", 0o755), file("etc/motd"),
			dir("etc/pki/", 0o755), dir("etc/pki/certs/", 0o751),
			link("etc/certs", "pki/certs"), link("etc/abs", "/etc/certs"),
			link("lib", "usr/lib"), link("etc/dangling", "/nowhere"), link("etc/loop", "loop"), link("etc/motd.d", "motd"),
		},
		// A layer on top: what it removes is gone.
		[]tar.Header{file("etc/.wh.gone.d"), dir("etc/opaque.d/", 0o711), file("etc/opaque.d/.wh..wh..opq")},
	)
	digest, err := base.Digest()
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name    string
		layer   []tar.Header
		want    []string // "" entries: the layer is returned as given
		wantErr string
		noRead  bool // the base's layers need not be read
	}{{
		name:  "parents as the base has them, or 0755 root's",
		layer: []tar.Header{file("etc/secret.d/a"), file("etc/selinux.d/b"), file("etc/new/deep/c")},
		want: []string{
			"etc/ 5 0755 0:0", "etc/secret.d/ 5 0700 999:0", "etc/secret.d/a 0 0644 0:0",
			"etc/selinux.d/ 5 0750 0:0 user.strata=kept", "etc/selinux.d/b 0 0644 0:0",
			"etc/new/ 5 0755 0:0", "etc/new/deep/ 5 0755 0:0", "etc/new/deep/c 0 0644 0:0",
		},
	}, {
		name:  "what an upper layer of the base removes is not there",
		layer: []tar.Header{file("etc/gone.d/a"), file("etc/opaque.d/old/b")},
		want: []string{
			"etc/ 5 0755 0:0", "etc/gone.d/ 5 0755 0:0", "etc/gone.d/a 0 0644 0:0",
			"etc/opaque.d/ 5 0711 0:0", "etc/opaque.d/old/ 5 0755 0:0", "etc/opaque.d/old/b 0 0644 0:0",
		},
	}, {
		name: "entries under symlinked directories land where the links point",
		layer: []tar.Header{file("etc/certs/a.pem"), file("etc/abs/b.pem"), file("lib/x.conf"),
			{Typeflag: tar.TypeLink, Name: "etc/certs/h.pem", Linkname: "etc/abs/b.pem"}},
		want: []string{
			"etc/ 5 0755 0:0", "etc/pki/ 5 0755 0:0", "etc/pki/certs/ 5 0751 0:0", "etc/pki/certs/a.pem 0 0644 0:0",
			"etc/pki/certs/b.pem 0 0644 0:0",
			"usr/ 5 0755 0:0", "usr/lib/ 5 0755 0:0", "usr/lib/x.conf 0 0644 0:0",
			"etc/pki/certs/h.pem 1 0000 0:0 -> etc/pki/certs/b.pem",
		},
	}, {
		name:  "a directory or file of the layer replaces a symlink of the base",
		layer: []tar.Header{dir("etc/", 0o755), dir("etc/certs/", 0o700), file("etc/certs/a.pem"), file("etc/abs")},
		want:  []string{""},
	}, {
		name:  "a layer's own symlink is followed by the entries after it",
		layer: []tar.Header{dir("etc/", 0o755), link("etc/mine", "secret.d"), file("etc/mine/a")},
		want:  []string{"etc/ 5 0755 0:0", "etc/mine 2 0777 0:0 -> secret.d", "etc/secret.d/ 5 0700 999:0", "etc/secret.d/a 0 0644 0:0"},
	}, {
		name:   "a complete layer is used as given",
		layer:  []tar.Header{dir("etc/", 0o700), dir("etc/secret.d/", 0o755), file("etc/secret.d/a"), dir("new/", 0o700), file("new/b")},
		want:   []string{""},
		noRead: true,
	}, {
		name:  "a declared parent after its contents is not added",
		layer: []tar.Header{file("etc/secret.d/a"), dir("etc/secret.d/", 0o711)},
		want:  []string{"etc/ 5 0755 0:0", "etc/secret.d/a 0 0644 0:0", "etc/secret.d/ 5 0711 0:0"},
	}, {
		name:    "a symlink to nothing",
		layer:   []tar.Header{file("etc/dangling/a")},
		wantErr: "/etc/dangling, a symlink to /nowhere, which is not a directory",
	}, {
		name:    "a symlink loop",
		layer:   []tar.Header{file("etc/loop/a")},
		wantErr: "symlinks",
	}, {
		name:    "a file in the way",
		layer:   []tar.Header{file("etc/motd/a")},
		wantErr: "/etc/motd, which is not a directory",
	}, {
		name:    "a symlink to a file in the way",
		layer:   []tar.Header{file("etc/motd.d/a")},
		wantErr: "which is not a directory",
	}, {
		name:    "an entry above the root",
		layer:   []tar.Header{file("../etc/a")},
		wantErr: "leaves the image's root",
	}} {
		t.Run(c.name, func(t *testing.T) {
			layer := tarOf(t, c.layer)
			cache := NewBaseCache(1)
			reads := 0
			complete := func() ([]byte, error) {
				tree := cache.known(digest)
				c, err := completeLayer(layer, tree, func(need map[string]bool) error {
					reads++
					got := map[string]treeEntry{}
					if err := readBaseTree(base, need, got); err != nil {
						return err
					}
					for p, e := range got {
						tree[p] = e
					}
					cache.learn(digest, got)
					return nil
				})
				if err != nil {
					return nil, err
				}
				var buf bytes.Buffer
				err = c.writeTo(&buf)
				return buf.Bytes(), err
			}
			out, err := complete()
			if c.wantErr != "" {
				var se *StageError
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.As(err, &se) || se.Stage != StageLayer {
					t.Fatalf("error %v, want a Layer StageError saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.noRead && reads > 0 {
				t.Errorf("the base was read %d times", reads)
			}
			if slices.Equal(c.want, []string{""}) {
				if !bytes.Equal(out, layer) {
					t.Errorf("the layer was changed:\n%s", strings.Join(listing(t, out), "\n"))
				}
			} else if got := listing(t, out); !slices.Equal(got, c.want) {
				t.Errorf("completed layer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			before := reads
			again, err := complete()
			if err != nil {
				t.Fatal(err)
			}
			if reads != before || !bytes.Equal(again, out) {
				t.Errorf("with the cache: %d more reads of the base, same layer %v", reads-before, bytes.Equal(again, out))
			}
		})
	}
}

// The cache keeps the bases used last.
func TestBaseCacheEvicts(t *testing.T) {
	c := NewBaseCache(2)
	h := func(i int) v1.Hash { return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064d", i)} }
	for i := range 3 {
		c.learn(h(i), map[string]treeEntry{"etc": {kind: tar.TypeDir}})
	}
	c.known(h(1)) // used: h(2) is now the least recent
	c.learn(h(3), map[string]treeEntry{"etc": {kind: tar.TypeDir}})
	for i, want := range []bool{false, true, false, true} {
		if got := len(c.known(h(i))) > 0; got != want {
			t.Errorf("base %d kept %v, want %v", i, got, want)
		}
	}
}
