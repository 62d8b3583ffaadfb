package attached

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Bounds on a `sha256-<hex>.sig` attachment, checked on its manifest and
// its layers' sizes, reading no layer, before containers/image sees it. containers/image reads every layer
// of the attachment into memory, each up to 4 MiB, however many there
// are, and does not check a layer against the size its descriptor
// declares (only against its digest): 48 copies of one 4 MiB layer grew
// the controller's heap by about 390 MiB, over its 512 MiB limit.
const (
	// MaxLayers bounds the signatures of one image. Strata adds one per
	// key that signs a build (two during a rotation), a retried or re-run
	// signing may add a few more, and a vendor signs a base image once or
	// twice: 16 is several rotations' worth. It is also what bounds
	// memory when a hostile registry lies about sizes too: 16 layers of
	// containers/image's 4 MiB at most are 64 MiB of payload held at
	// once, well under the controller's 512 MiB.
	MaxLayers = 16
	// MaxBytes bounds the sum of the layers' sizes (each the larger of
	// what the manifest declares and what the registry stores). A
	// signature's payload (the simple-signing JSON) is under 1 KiB; 1 MiB
	// is room for every allowed layer at 64 KiB, and a thousandth of what
	// the attachment made the controller read.
	MaxBytes = 1 << 20
	// MaxManifestBytes bounds the attachment's manifest, which carries
	// the signatures themselves (and certificates, when there are) as
	// annotations: a few KiB per layer. go-containerregistry would read
	// up to 100 MiB and containers/image 4 MiB.
	MaxManifestBytes = 512 << 10
)

// Registry is how a registry is reached: the same credentials Strata
// pushes and pulls with elsewhere.
type Registry struct {
	// Keychain gives the credentials; nil is anonymous.
	Keychain authn.Keychain
	// Insecure lists host[:port]s reached over plain HTTP (the test
	// registry on 127.0.0.1).
	Insecure []string
}

// AttachmentError is an image's signature attachment that is not read
// because it is over a bound: too many layers, too large in sum, or a
// manifest too large.
type AttachmentError struct {
	// Image is the image (repo@sha256:...).
	Image string
	// Attachment is the attachment's tag (repo:sha256-<hex>.sig).
	Attachment string
	// What is over: "layers", "bytes of layers", "bytes of manifest", or
	// "bytes in a layer" for a layer of negative size (Got).
	What string
	// Got and Limit are the attachment's count and the bound.
	Got, Limit int64
}

func (e *AttachmentError) Error() string {
	if e.Got < 0 {
		return fmt.Sprintf("the signature attachment %s of %s declares a layer of %d bytes: it is not read", e.Attachment, e.Image, e.Got)
	}
	return fmt.Sprintf("the signature attachment %s of %s has %d %s, over the limit of %d: it is not read", e.Attachment, e.Image, e.Got, e.What, e.Limit)
}

// Check refuses image's attachment, with an *AttachmentError, when it is
// over a bound; nil when it is within them or there is none. It reads
// the attachment's manifest, at most MaxManifestBytes of it, and asks
// the size of each layer (a HEAD): the sizes a manifest declares are not
// checked by a registry (distribution stores a manifest that understates
// its layers), nor by containers/image. A registry that lies about sizes
// too is bounded by the count alone. An attachment pushed between this
// check and a later read is still read; that costs one verification, not
// every one.
func Check(ctx context.Context, image string, reg Registry) error {
	_, err := readManifest(ctx, image, reg)
	return err
}

// attachment is an image's attachment manifest, checked against the
// bounds, and the client that read it.
type attachment struct {
	tag    name.Tag
	client *registryClient
	// body is the manifest; nil when there is no attachment.
	body []byte
}

func readManifest(ctx context.Context, image string, reg Registry) (*attachment, error) {
	tag, err := Tag(image, reg)
	if err != nil {
		return nil, err
	}
	c, err := newRegistryClient(ctx, tag.Context(), reg)
	if err != nil {
		return nil, fmt.Errorf("read the signature attachment %s of %s: %w", tag, image, err)
	}
	a := &attachment{tag: tag, client: c}
	refuse := func(what string, got, limit int64) error {
		return &AttachmentError{Image: image, Attachment: tag.String(), What: what, Got: got, Limit: limit}
	}
	body, err := c.manifest(ctx, tag.TagStr(), MaxManifestBytes)
	var tooLarge *manifestTooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return a, refuse("bytes of manifest", tooLarge.size, MaxManifestBytes)
	case err != nil:
		return a, fmt.Errorf("read the signature attachment %s of %s: %w", tag, image, err)
	case body == nil:
		return a, nil
	}
	// Only what bounds the reads: the layers. An index or anything else
	// has none here, and containers/image refuses it without reading
	// further.
	var m struct {
		Layers []struct {
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return a, fmt.Errorf("parse the signature attachment %s of %s: %w", tag, image, err)
	}
	if n := int64(len(m.Layers)); n > MaxLayers {
		return a, refuse("layers", n, MaxLayers)
	}
	var sum int64
	for _, l := range m.Layers {
		if l.Size < 0 {
			return a, refuse("bytes in a layer", l.Size, MaxBytes)
		}
		size := l.Size
		if size <= MaxBytes-sum {
			// Only when the declared size passes: a larger one is
			// refused as it is.
			stored, err := c.blobSize(ctx, l.Digest)
			if err != nil {
				return a, fmt.Errorf("read the signature attachment %s of %s: layer %s: %w", tag, image, l.Digest, err)
			}
			size = max(size, stored)
		}
		// Saturating: a size near 2^63 must not wrap the sum.
		sum = min(sum, math.MaxInt64-size) + size
	}
	if sum > MaxBytes {
		return a, refuse("bytes of layers", sum, MaxBytes)
	}
	a.body = body
	return a, nil
}

// Tag is where containers/image keeps the sigstore signatures of image
// (repo[:tag]@sha256:...): repo:sha256-<hex>.sig.
func Tag(image string, reg Registry) (name.Tag, error) {
	repo, digest, ok := strings.Cut(image, "@")
	if !ok {
		return name.Tag{}, fmt.Errorf("image %q is not a reference by digest", image)
	}
	repo = imageRepo(repo)
	var opts []name.Option
	if r, err := name.NewRepository(repo); err == nil && slices.Contains(reg.Insecure, r.RegistryStr()) {
		opts = append(opts, name.Insecure)
	}
	return name.NewTag(repo+":"+strings.Replace(digest, ":", "-", 1)+".sig", opts...)
}

// imageRepo drops a tag from repo (host/path[:tag]).
func imageRepo(repo string) string {
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		return repo[:i]
	}
	return repo
}

// registryClient makes the few bounded requests the check needs, with
// go-containerregistry's authentication and the credentials and
// plain-HTTP hosts containers/image is given.
type registryClient struct {
	client http.Client
	base   url.URL // scheme://host/v2/repo
}

func newRegistryClient(ctx context.Context, repo name.Repository, reg Registry) (*registryClient, error) {
	auth := authn.Anonymous
	if reg.Keychain != nil {
		a, err := authn.Resolve(ctx, reg.Keychain, repo)
		if err != nil {
			return nil, fmt.Errorf("credentials for %s: %w", repo.RegistryStr(), err)
		}
		auth = a
	}
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, remote.DefaultTransport, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, err
	}
	// HTTPS unless the host is listed insecure, as containers/image
	// reaches it (go-containerregistry would also use HTTP for private
	// addresses).
	scheme := "https"
	if slices.Contains(reg.Insecure, repo.RegistryStr()) {
		scheme = "http"
	}
	return &registryClient{
		client: http.Client{Transport: rt},
		base:   url.URL{Scheme: scheme, Host: repo.RegistryStr(), Path: "/v2/" + repo.RepositoryStr()},
	}, nil
}

type manifestTooLargeError struct{ size int64 }

func (e *manifestTooLargeError) Error() string {
	return fmt.Sprintf("manifest of %d bytes or more", e.size)
}

// manifest reads the manifest tag names, at most limit bytes of it
// (more is a *manifestTooLargeError); nil when there is none.
func (c *registryClient) manifest(ctx context.Context, tag string, limit int64) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, "manifests/"+tag,
		"application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		return nil, err
	}
	if resp.ContentLength > limit {
		return nil, &manifestTooLargeError{size: resp.ContentLength}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, &manifestTooLargeError{size: int64(len(body))}
	}
	return body, nil
}

// blobSize is the size the registry gives for the blob digest names; 0
// when it gives none, or for a digest containers/image refuses without
// reading (it validates digests first).
func (c *registryClient) blobSize(ctx context.Context, digest string) (int64, error) {
	if _, err := v1.NewHash(digest); err != nil {
		return 0, nil
	}
	resp, err := c.do(ctx, http.MethodHead, "blobs/"+digest, "")
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		return 0, err
	}
	return max(resp.ContentLength, 0), nil
}

// blob reads the blob digest names, at most limit bytes, and checks it
// against its digest.
func (c *registryClient) blob(ctx context.Context, digest v1.Hash, limit int64) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, "blobs/"+digest.String(), "")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("blob %s is over %d bytes", digest, limit)
	}
	got, _, err := v1.SHA256(strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	if got != digest {
		return nil, fmt.Errorf("blob %s has digest %s", digest, got)
	}
	return body, nil
}

func (c *registryClient) do(ctx context.Context, method, path, accept string) (*http.Response, error) {
	u := c.base.JoinPath(path)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return c.client.Do(req)
}
