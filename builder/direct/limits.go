package direct

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// What one Build may hold, and how many hold it at once. The build
// controller runs several builds at once in a process with a memory
// limit; a base image chosen by whoever controls its registry must not
// be able to take the process past it, and once past it the controller
// would crash on the same input after every restart.
const (
	// MaxConcurrentBuilds is how many Builds of one process read their
	// bases and make their layers at once; the others wait their turn
	// (within their context). The push that follows runs outside it: it
	// streams, and a first push to another registry may copy a base's
	// layers for minutes.
	MaxConcurrentBuilds = 2
	// MaxManifestSize bounds each manifest (the base's, and its index's)
	// Build reads: go-containerregistry reads up to 100 MiB of one into
	// memory. Registries need accept no more than 4 MiB (the OCI
	// distribution spec), and distribution refuses more.
	MaxManifestSize = 4 << 20
	// MaxBaseConfigSize bounds the base image's config blob, which Build
	// reads, parses and writes again with the new layer (a few copies).
	// OS images' configs are tens of KiB: the config, the labels and a
	// history entry per layer.
	MaxBaseConfigSize = 1 << 20
	// MaxBaseEntries bounds the tar entries Build reads from a base's
	// layers to complete a layer (parents.go), all layers together: a
	// layer of millions of empty entries is a few MiB compressed. A
	// whole OS image has a few hundred thousand.
	MaxBaseEntries = 2_000_000
)

// maxBaseEntries is MaxBaseEntries; tests lower it.
var maxBaseEntries = MaxBaseEntries

// slots holds a token for each Build making its layer.
var slots = make(chan struct{}, MaxConcurrentBuilds)

// waiting, when set (by tests), is called when a Build starts waiting
// for a slot.
var waiting func()

// acquire waits for a slot, or for ctx to end; release frees the slot.
func acquire(ctx context.Context) (release func(), err error) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	default:
	}
	if waiting != nil {
		waiting()
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, stageErr(StageBase, "wait for one of the %d configuration layers built at once to finish: %w", MaxConcurrentBuilds, ctx.Err())
	}
}

// tooManyEntries is the refusal of a base with more than MaxBaseEntries
// entries on the way to the layer's paths.
func tooManyEntries() error {
	return fmt.Errorf("its layers have more than %d entries, the most Strata reads of a base image to complete a configuration layer on it", maxBaseEntries)
}

// limitManifests is a transport that fails a manifest read of more than
// MaxManifestSize bytes, before it is read when the registry says its
// length, else at the first byte past it.
type limitManifests struct{ inner http.RoundTripper }

func (t limitManifests) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || !strings.Contains(req.URL.Path, "/manifests/") {
		return resp, err
	}
	if resp.ContentLength > MaxManifestSize {
		resp.Body.Close()
		return nil, manifestTooLarge(req)
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: MaxManifestSize, req: req}
	return resp, nil
}

func manifestTooLarge(req *http.Request) error {
	return fmt.Errorf("GET %s: the manifest is larger than %d bytes (%d MiB), the most Strata reads", req.URL.Redacted(), MaxManifestSize, MaxManifestSize>>20)
}

// limitedBody fails a read past its limit.
type limitedBody struct {
	io.ReadCloser
	left int64
	req  *http.Request
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return 0, manifestTooLarge(b.req)
	}
	return n, err
}
