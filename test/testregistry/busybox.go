package testregistry

import (
	"archive/tar"
	"bytes"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BusyboxPath is the static busybox of Debian's busybox-static package.
const BusyboxPath = "/bin/busybox"

// Busybox is a one-layer linux/amd64 base image made from the host's
// BusyboxPath: the binary and its applets as symlinks in /bin, an
// /etc/passwd and /etc/group with root and core (1000), an /etc/motd of
// "base motd\n", /tmp with mode 1777 and empty /usr, /usr/lib and /var.
// Every entry's time is the Unix epoch, so the image is the same on every
// run on one host. A missing busybox fails the test: a skip would hide that
// nothing was tested.
func Busybox(t testing.TB) v1.Image {
	t.Helper()
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatalf("%s is missing: the test builds its base image from it (apt-get install busybox-static): %v", BusyboxPath, err)
	}
	list, err := exec.Command(BusyboxPath, "--list").Output()
	if err != nil {
		t.Fatalf("%s --list: %v", BusyboxPath, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, data string) {
		h.ModTime = time.Unix(0, 0).UTC()
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, data); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin/", "etc/", "usr/", "usr/lib/", "var/"} {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}, "")
	}
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}, "")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755}, string(bb))
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" {
			add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777}, "")
		}
	}
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644}, "root:x:0:0:root:/root:/bin/sh\ncore:x:1000:1000:core:/var/home/core:/bin/sh\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/group", Mode: 0o644}, "root:x:0:\ncore:x:1000:\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/motd", Mode: 0o644}, "base motd\n")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{Architecture: "amd64", OS: "linux",
		RootFS: v1.RootFS{Type: "layers"},
		Config: v1.Config{Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, Cmd: []string{"/bin/sh"}}})
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Push pushes img to the registry as repoTag ("repo:tag", no host), with
// the registry's credentials, and returns it by digest as
// host/repo@sha256:….
func (r *Registry) Push(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := name.NewTag(r.Host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(r.Auth())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return ref.Context().Name() + "@" + d.String()
}

// FilesLayer is a layer of files (path → content; a path ending in "/" is
// a directory, and missing parent directories are added), in path order,
// with epoch times, modes 0644 and 0755 and root's ownership: the layer a
// test adds on top of Busybox.
func FilesLayer(t testing.TB, files map[string]string) v1.Layer {
	t.Helper()
	names := slices.Collect(maps.Keys(files))
	for name := range files {
		for d := path.Dir(strings.TrimSuffix(name, "/")); d != "."; d = path.Dir(d) {
			if _, ok := files[d+"/"]; !ok && !slices.Contains(names, d+"/") {
				names = append(names, d+"/")
			}
		}
	}
	slices.Sort(names)
	return TarLayer(t, func(tw *tar.Writer) error {
		for _, name := range names {
			h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[name])), ModTime: time.Unix(0, 0)}
			if strings.HasSuffix(name, "/") {
				h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := io.WriteString(tw, files[name]); err != nil {
				return err
			}
		}
		return nil
	})
}

// TarLayer is the layer of the tar that write writes (the writer is
// closed after it).
func TarLayer(t testing.TB, write func(*tar.Writer) error) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := write(tw); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return layer
}
