package signing_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/test/testregistry"
)

// blobCounter is a proxy in front of a registry that counts the blobs
// read through it.
type blobCounter struct {
	host  string
	blobs atomic.Int64
}

func countBlobs(t *testing.T, reg *testregistry.Registry) *blobCounter {
	t.Helper()
	c := &blobCounter{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: reg.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			c.blobs.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.host = strings.TrimPrefix(srv.URL, "http://")
	return c
}

// attach pushes an attachment (sha256-<hex>.sig) of layers to image, as
// an attacker with push rights can.
func attach(t *testing.T, reg *testregistry.Registry, image string, layers ...mutate.Addendum) {
	t.Helper()
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(img, layers...)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(testregistry.SignatureTag(t, image), img, remote.WithAuth(reg.Auth())); err != nil {
		t.Fatalf("push the attachment of %s: %v", image, err)
	}
}

// attachRaw pushes manifest as the attachment of image, after blobs: a
// manifest that declares what it likes (distribution does not check the
// sizes of layers).
func attachRaw(t *testing.T, reg *testregistry.Registry, image, manifest string, blobs ...v1.Layer) {
	t.Helper()
	tag := testregistry.SignatureTag(t, image)
	for _, b := range blobs {
		if err := remote.WriteLayer(tag.Context(), b, remote.WithAuth(reg.Auth())); err != nil {
			t.Fatal(err)
		}
	}
	if err := remote.Put(tag, rawManifest(manifest), remote.WithAuth(reg.Auth())); err != nil {
		t.Fatalf("push the attachment of %s: %v", image, err)
	}
}

type rawManifest string

func (m rawManifest) RawManifest() ([]byte, error)        { return []byte(m), nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

func sigLayer(l v1.Layer, annotations map[string]string) mutate.Addendum {
	return mutate.Addendum{Layer: l, MediaType: "application/vnd.dev.cosign.simplesigning.v1+json", Annotations: annotations}
}

// An attachment over a bound (many layers, large layers, layers larger
// than the manifest says, a large manifest) is refused by name on its manifest alone: no layer is read,
// and the heap does not grow by what containers/image would have read
// (issue 37: 48 copies of a 4 MiB layer grew it by about 390 MiB). The
// image and the attachment are named, with the count and the limit.
func TestOversizedAttachmentIsRefusedUnread(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	proxy := countBlobs(t, reg)
	r := signing.Registry{Insecure: []string{reg.Host, proxy.host}}
	kp := keyPair(t)

	big := static.NewLayer(bytes.Repeat([]byte("s"), 4<<20), "application/vnd.dev.cosign.simplesigning.v1+json")
	small := static.NewLayer([]byte(`{"critical":{}}`), "application/vnd.dev.cosign.simplesigning.v1+json")
	many := make([]mutate.Addendum, 48)
	for i := range many {
		many[i] = sigLayer(big, nil)
	}
	config := static.NewLayer([]byte("{}"), types.OCIConfigJSON)
	bigDigest, err := big.Digest()
	if err != nil {
		t.Fatal(err)
	}
	configDigest, err := config.Digest()
	if err != nil {
		t.Fatal(err)
	}
	understated := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":%q,"size":2},"layers":[`+
		`{"mediaType":"application/vnd.dev.cosign.simplesigning.v1+json","digest":%[2]q,"size":300},{"mediaType":"application/vnd.dev.cosign.simplesigning.v1+json","digest":%[2]q,"size":300}]}`,
		configDigest, bigDigest)
	for _, tc := range []struct {
		name   string
		layers []mutate.Addendum
		raw    string // a manifest pushed as it is, instead of layers
		what   string
		got    int64 // 0: any count over the limit
		limit  int64
	}{
		{"many layers", many, "", "layers", 48, signing.MaxAttachmentLayers},
		{"large layers", []mutate.Addendum{sigLayer(big, nil), sigLayer(big, nil)}, "", "bytes of layers", 8 << 20, signing.MaxAttachmentBytes},
		// Refused at the first layer's size, before the second is asked.
		{"understated sizes", nil, understated, "bytes of layers", 4<<20 + 300, signing.MaxAttachmentBytes},
		{"large manifest", []mutate.Addendum{sigLayer(small, map[string]string{"padding": strings.Repeat("p", 600<<10)})}, "", "bytes of manifest", 0, signing.MaxAttachmentManifestBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pushed := reg.Push(t, "os/"+strings.ReplaceAll(tc.name, " ", "-")+":latest", testregistry.Busybox(t))
			if tc.raw != "" {
				attachRaw(t, reg, pushed, tc.raw, big, config)
			} else {
				attach(t, reg, pushed, tc.layers...)
			}
			image := strings.Replace(pushed, reg.Host, proxy.host, 1)
			tag := testregistry.SignatureTag(t, image).String()

			check := func(what string, err error) {
				t.Helper()
				var over *signing.AttachmentError
				if !errors.As(err, &over) {
					t.Fatalf("%s: got %v, want an AttachmentError", what, err)
				}
				if over.Image != image || over.Attachment != tag || over.What != tc.what || over.Limit != tc.limit || (tc.got != 0 && over.Got != tc.got) || over.Got <= over.Limit {
					t.Fatalf("%s: got %+v, want %s of %s over %d %s", what, over, tag, image, tc.limit, tc.what)
				}
				for _, s := range []string{image, tag} {
					if !strings.Contains(err.Error(), s) {
						t.Fatalf("%s: %q does not name %s", what, err, s)
					}
				}
				t.Logf("%s: %v", what, err)
			}

			before := proxy.blobs.Load()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			err := signing.Verify(ctx, image, [][]byte{kp.Public}, r)
			runtime.ReadMemStats(&m1)
			grew := m1.TotalAlloc - m0.TotalAlloc
			t.Logf("verify allocated %d KiB, read %d blobs", grew>>10, proxy.blobs.Load()-before)
			var refused *signing.RefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("verify: got %v, want a RefusedError", err)
			}
			check("verify", err)
			// TotalAlloc counts every allocation, freed or not: what was
			// read, however briefly.
			if grew > 16<<20 {
				t.Fatalf("verify allocated %d MiB, want under 16 MiB", grew>>20)
			}
			check("sign", signing.Sign(ctx, image, kp.Private, r))
			// A node's policy: its repository's scope requires signatures.
			repo, _, _ := strings.Cut(image, "@")
			nodePolicy := fmt.Sprintf(`{"default":[{"type":"reject"}],"transports":{"docker":{"":[{"type":"insecureAcceptAnything"}],%q:[{"type":"sigstoreSigned","keyData":%q,"signedIdentity":{"type":"matchRepository"}}]}}}`,
				repo, base64.StdEncoding.EncodeToString(kp.Public))
			check("verify with a node's policy", signing.VerifyPolicy(ctx, image, []byte(nodePolicy), r))
			if n := proxy.blobs.Load() - before; n != 0 {
				t.Fatalf("%d blobs read, want none: the attachment's layers were read", n)
			}
			// A policy that does not read signatures is not changed by
			// them.
			if err := signing.VerifyPolicy(ctx, image, []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`), r); err != nil {
				t.Fatalf("verify with a policy that accepts anything: %v", err)
			}
		})
	}
}
