package direct

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-dev/strata/test/testregistry"
)

// wantBaseErr fails t unless err is a Base StageError saying all of
// want.
func wantBaseErr(t *testing.T, err error, want ...string) {
	t.Helper()
	var se *StageError
	if !errors.As(err, &se) || se.Stage != StageBase {
		t.Fatalf("error %v, want a Base StageError", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// TestBaseConfigIsBounded: a base whose config is larger than
// MaxBaseConfigSize is refused from its manifest, before its config is
// downloaded: a registry user could otherwise make every build read,
// parse and copy a config of any size.
func TestBaseConfigIsBounded(t *testing.T) {
	reg := testregistry.Start(t, regPass)
	img := testregistry.Busybox(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Labels = map[string]string{"padding": strings.Repeat("p", MaxBaseConfigSize)}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	base := reg.Push(t, "limits/big-config:latest", img)
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}

	rec := &recorder{}
	req := request(base, reg.Host+"/limits/out:latest", testLayer(t, "a"), reg)
	req.Transport = rec
	_, err = Build(context.Background(), req)
	wantBaseErr(t, err, "limits/big-config", fmt.Sprintf("config of %d bytes", m.Config.Size), fmt.Sprintf("at most %d bytes (1024 KiB)", MaxBaseConfigSize))
	if got := rec.calls(blobCalls(http.MethodGet, reg.Host, []v1.Hash{m.Config.Digest})); len(got) > 0 {
		t.Errorf("the config was downloaded: %+v", got)
	}
}

// TestBaseEntriesAreBounded: completing a layer reads at most
// maxBaseEntries entries of the base's layers; a base of more (a layer of
// millions of empty entries is a few MiB compressed) is refused.
func TestBaseEntriesAreBounded(t *testing.T) {
	reg := testregistry.Start(t, regPass)
	base := reg.Push(t, "limits/base:latest", testregistry.Busybox(t)) // some 400 entries
	defer func(n int) { maxBaseEntries = n }(maxBaseEntries)
	maxBaseEntries = 100

	// etc/strata-new is in no base: finding that takes every entry.
	layer := tarOf(t, []tar.Header{{Typeflag: tar.TypeReg, Name: "etc/strata-new/a", Mode: 0o644}})
	_, err := Build(context.Background(), request(base, reg.Host+"/limits/out:latest", layer, reg))
	wantBaseErr(t, err, "limits/base", "more than 100 entries")

	maxBaseEntries = MaxBaseEntries
	if _, err := Build(context.Background(), request(base, reg.Host+"/limits/out:latest", layer, reg)); err != nil {
		t.Fatalf("with the real bound: %v", err)
	}
}

// TestConcurrentBuildsAreLimited: at most MaxConcurrentBuilds Builds read
// their bases and make their layers at once; the next waits until one is
// done with its layer, and a Build whose context ends while it waits says
// so.
func TestConcurrentBuildsAreLimited(t *testing.T) {
	reg := testregistry.Start(t, regPass)
	base := reg.Push(t, "limits/base:latest", testregistry.Busybox(t))

	// Reading the base's manifest blocks until unblock is closed.
	arrived := make(chan struct{}, MaxConcurrentBuilds+1)
	unblock := make(chan struct{})
	gate := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/limits/base/manifests/") {
			arrived <- struct{}{}
			<-unblock
		}
		return remote.DefaultTransport.RoundTrip(r)
	})
	queued := make(chan struct{}, 2)
	waiting = func() { queued <- struct{}{} }
	defer func() { waiting = nil }()

	var wg sync.WaitGroup
	errs := make([]error, MaxConcurrentBuilds+1)
	for i := range MaxConcurrentBuilds + 1 {
		req := request(base, fmt.Sprintf("%s/limits/out-%d:latest", reg.Host, i), testLayer(t, fmt.Sprint(i)), reg)
		req.Transport = gate
		wg.Go(func() { _, errs[i] = Build(context.Background(), req) })
	}
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	defer func() { release(); wg.Wait() }()
	for range MaxConcurrentBuilds {
		<-arrived
	}
	// The last one waits for a slot, not in the registry.
	select {
	case <-queued:
	case <-arrived:
		t.Fatalf("%d builds read their bases at once, want at most %d", MaxConcurrentBuilds+1, MaxConcurrentBuilds)
	}

	// A Build whose context ends while it waits gives up.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := Build(ctx, request(base, reg.Host+"/limits/out-cancelled:latest", testLayer(t, "c"), reg))
		done <- err
	}()
	<-queued
	cancel()
	wantBaseErr(t, <-done, "wait for one of the 2 configuration layers", "context canceled")

	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("build %d: %v", i, err)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBaseTreeIsExtracts: readBaseTree, which remembers only the paths
// that matter, finds what mutate.Extract's file system has at every path
// of a base with whiteouts, an opaque directory, a file over a directory,
// a directory made again over its own whiteout and a link out of the
// root.
func TestBaseTreeIsExtracts(t *testing.T) {
	type entry struct {
		name   string
		kind   byte
		target string
	}
	layer := func(es ...entry) v1.Layer {
		return testregistry.TarLayer(t, func(tw *tar.Writer) error {
			for _, e := range es {
				h := &tar.Header{Typeflag: e.kind, Name: e.name, Linkname: e.target, Mode: 0o644}
				if e.kind == tar.TypeDir {
					h.Mode = 0o711
				}
				if err := tw.WriteHeader(h); err != nil {
					return err
				}
			}
			return nil
		})
	}
	d := func(n string) entry { return entry{n, tar.TypeDir, ""} }
	f := func(n string) entry { return entry{n, tar.TypeReg, ""} }
	l := func(n, to string) entry { return entry{n, tar.TypeSymlink, to} }
	img, err := mutate.AppendLayers(empty.Image,
		layer(d("a/"), d("a/b/"), f("a/b/c"), d("d/"), f("d/e"), d("f/"), d("f/g/"), f("f/g/h"), l("l", "a"), d("m/"), f("m/n"), f("m/o")),
		layer(f("a/.wh.b"), d("d/"), f("d/.wh..wh..opq"), f("d/new"), f("f"), d("x/"), f("m/o")),
		layer(d("a/b/"), f("a/b/k"), f("m/.wh.n"), l("esc", "../../outside"), l("x/in", "../a")),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]treeEntry{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			want[clean(h.Name)] = treeEntry{kind: tar.TypeDir}
		case tar.TypeSymlink:
			want[clean(h.Name)] = treeEntry{kind: tar.TypeSymlink, target: h.Linkname}
		default:
			want[clean(h.Name)] = treeEntry{kind: kindOther}
		}
	}
	for _, p := range []string{"a", "a/b", "a/b/c", "a/b/k", "d", "d/e", "d/new", "f", "f/g", "f/g/h", "l", "m", "m/n", "m/o", "x", "x/in", "esc", "none", "none/deeper"} {
		tree := map[string]treeEntry{}
		if err := readBaseTree(img, map[string]bool{p: true}, tree); err != nil {
			t.Fatal(err)
		}
		got := tree[p]
		got.dir = nil
		if got != want[p] {
			t.Errorf("%s: read %+v, mutate.Extract has %+v", p, got, want[p])
		}
	}
}

// TestManifestsAreBounded: a manifest larger than MaxManifestSize fails
// its read, at once when the registry says its length, else at the first
// byte past the limit; a manifest at the limit and a blob of any size
// are read whole.
func TestManifestsAreBounded(t *testing.T) {
	big := strings.Repeat("m", MaxManifestSize+1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := big
		if strings.HasSuffix(r.URL.Path, "/at-limit") {
			body = big[:MaxManifestSize]
		}
		if r.URL.Query().Has("chunked") {
			w.(http.Flusher).Flush() // no Content-Length
		}
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	rt := limitManifests{inner: http.DefaultTransport}
	read := func(p string) (int, error) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return len(b), err
	}
	for _, c := range []struct {
		path    string
		want    int
		wantErr bool
	}{
		{"/v2/os/base/manifests/sha256:1", 0, true},
		{"/v2/os/base/manifests/sha256:1?chunked", 0, true},
		{"/v2/os/base/manifests/at-limit", MaxManifestSize, false},
		{"/v2/os/base/manifests/at-limit?chunked", MaxManifestSize, false},
		{"/v2/os/base/blobs/sha256:1?chunked", MaxManifestSize + 1, false},
	} {
		n, err := read(c.path)
		if c.wantErr {
			if err == nil || !strings.Contains(err.Error(), "larger than 4194304 bytes (4 MiB)") {
				t.Errorf("%s: read %d bytes, error %v; want the limit", c.path, n, err)
			}
			continue
		}
		if err != nil || n != c.want {
			t.Errorf("%s: read %d bytes, error %v; want %d", c.path, n, err, c.want)
		}
	}
}

// TestBaseManifestIsBounded: a base whose manifest passes
// MaxManifestSize (go-containerregistry's registry takes it; distribution
// would not) fails the build at the base, saying why.
func TestBaseManifestIsBounded(t *testing.T) {
	reg := testregistry.StartReferrers(t, "")
	img, ok := mutate.Annotations(testregistry.Busybox(t), map[string]string{"padding": strings.Repeat("p", MaxManifestSize)}).(v1.Image)
	if !ok {
		t.Fatal("not an image")
	}
	base := reg.Push(t, "limits/big-manifest:latest", img)
	_, err := Build(context.Background(), request(base, reg.Host+"/limits/out:latest", testLayer(t, "a"), reg))
	wantBaseErr(t, err, "limits/big-manifest", "larger than 4194304 bytes (4 MiB)")
}
