package direct

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-dev/strata/test/testregistry"
)

// regPass is the test registries' password for user "strata".
const regPass = "s3cret-Passw0rd"

// keychain is the credentials of the test registries, by host.
func keychainOf(regs ...*testregistry.Registry) authn.Keychain {
	kc := hostKeychain{}
	for _, r := range regs {
		kc[r.Host] = r.Auth()
	}
	return kc
}

type hostKeychain map[string]authn.Authenticator

func (k hostKeychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	if a, ok := k[res.RegistryStr()]; ok {
		return a, nil
	}
	return authn.Anonymous, nil
}

// request is a Build of layer on base to target, with the credentials and
// insecure list of regs.
func request(base, target string, layer []byte, regs ...*testregistry.Registry) Request {
	var insecure []string
	for _, r := range regs {
		insecure = append(insecure, r.Host)
	}
	return Request{
		Base: base, BaseKeychain: keychainOf(regs...),
		Platform:  v1.Platform{OS: "linux", Architecture: "amd64"},
		Layer:     layer,
		Labels:    map[string]string{"strata.dev/config": "rendered-worker-1"},
		CreatedBy: "strata: configuration rendered-worker-1",
		Target:    target, PushKeychain: keychainOf(regs...),
		Insecure: insecure,
	}
}

// testLayer is a configuration layer as the renderer makes them:
// directories, regular files, a symlink, a hard link, numeric owners,
// epoch times. variant goes into a file, so that two variants differ.
func testLayer(t testing.TB, variant string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	entries := []struct {
		h    tar.Header
		body string
	}{
		{tar.Header{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755}, ""},
		{tar.Header{Typeflag: tar.TypeReg, Name: "etc/strata-test", Mode: 0o644}, "strata test " + variant + "\n"},
		{tar.Header{Typeflag: tar.TypeSymlink, Name: "etc/strata-link", Linkname: "strata-test", Mode: 0o777}, ""},
		{tar.Header{Typeflag: tar.TypeLink, Name: "etc/strata-hard", Linkname: "etc/strata-test", Mode: 0o644}, ""},
		{tar.Header{Typeflag: tar.TypeDir, Name: "etc/strata.d/", Mode: 0o750}, ""},
		{tar.Header{Typeflag: tar.TypeReg, Name: "etc/strata.d/secret.conf", Mode: 0o600}, "key=value\n"},
		{tar.Header{Typeflag: tar.TypeDir, Name: "var/", Mode: 0o755}, ""},
		{tar.Header{Typeflag: tar.TypeDir, Name: "var/home/", Mode: 0o755}, ""},
		{tar.Header{Typeflag: tar.TypeDir, Name: "var/home/core/", Mode: 0o700, Uid: 1000, Gid: 1000}, ""},
		{tar.Header{Typeflag: tar.TypeReg, Name: "var/home/core/.profile", Mode: 0o640, Uid: 1000, Gid: 1000}, "export STRATA=1\n"},
	}
	for _, e := range entries {
		h := e.h
		h.ModTime = epoch
		h.Size = int64(len(e.body))
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// recorder is a transport that records every registry request and counts
// the bytes read from each response body.
type recorder struct {
	mu   sync.Mutex
	reqs []*call
}

type call struct {
	Method, Host, Path, Query string
	Status                    int
	BodyBytes                 int64
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := remote.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	c := &call{Method: req.Method, Host: req.URL.Host, Path: req.URL.Path, Query: req.URL.RawQuery, Status: resp.StatusCode}
	r.mu.Lock()
	r.reqs = append(r.reqs, c)
	r.mu.Unlock()
	resp.Body = &countingBody{ReadCloser: resp.Body, r: r, c: c}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	r *recorder
	c *call
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.r.mu.Lock()
	b.c.BodyBytes += int64(n)
	b.r.mu.Unlock()
	return n, err
}

// calls returns the recorded requests that match.
func (r *recorder) calls(match func(c call) bool) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.reqs {
		if match(*c) {
			out = append(out, *c)
		}
	}
	return out
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.reqs = nil
	r.mu.Unlock()
}

// blobCalls matches requests of method for one of the blobs on host.
func blobCalls(method, host string, blobs []v1.Hash) func(c call) bool {
	return func(c call) bool {
		if c.Method != method || c.Host != host {
			return false
		}
		for _, b := range blobs {
			if strings.HasSuffix(c.Path, "/blobs/"+b.String()) {
				return true
			}
		}
		return false
	}
}

// layerDigests are an image's layer digests and their total size.
func layerDigests(t testing.TB, img v1.Image) ([]v1.Hash, int64) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var ds []v1.Hash
	var total int64
	for _, l := range m.Layers {
		ds = append(ds, l.Digest)
		total += l.Size
	}
	return ds, total
}

// allocated is the bytes the process allocated while f ran. It counts
// every allocation, freed or not, so a layer passing through memory
// counts in full even if the collector reclaims it at once.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
