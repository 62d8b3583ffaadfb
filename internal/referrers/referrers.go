package referrers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/strata-dev/strata/internal/registry"
)

// MaxArtifactBytes bounds what Read reads of an artifact: SBOMs of a
// configuration are kilobytes; a registry must not make a reader hold
// gigabytes.
const MaxArtifactBytes = 16 << 20

// callTimeout bounds one operation (a few registry requests of small
// blobs and manifests), for the reason registry.Client bounds its calls.
const callTimeout = 30 * time.Second

// emptyConfig is the OCI empty descriptor's content.
var emptyConfig = []byte("{}")

// Artifact is what Attach stores.
type Artifact struct {
	// Type is the artifact's media type (application/spdx+json): the
	// referrer manifest's artifactType and its layer's media type.
	Type string
	// Data is the artifact's content.
	Data []byte
	// Annotations are set on the referrer manifest; they appear in the
	// referrers list.
	Annotations map[string]string
}

// Referrer is an artifact attached to an image.
type Referrer struct {
	// ArtifactType is the artifact's media type.
	ArtifactType string `json:"artifactType"`
	// Digest is the referrer manifest's digest, in the image's repository.
	Digest v1.Hash `json:"digest"`
	// Size is the referrer manifest's size in bytes.
	Size int64 `json:"size"`
	// Annotations are the referrer manifest's annotations.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Client attaches, lists, reads and deletes referrers; Registry parses
// references (its Insecure list says which registries are plain HTTP).
type Client struct {
	Registry registry.Client
}

// image parses a digested image reference.
func (c Client) image(image string) (name.Digest, error) {
	ref, err := c.Registry.ParseReference(image)
	if err != nil {
		return name.Digest{}, fmt.Errorf("parse image reference %q: %w", image, err)
	}
	d, ok := ref.(name.Digest)
	if !ok {
		return name.Digest{}, fmt.Errorf("image %s is not by digest (repository@sha256:…): referrers name an image's digest", image)
	}
	return d, nil
}

// Attach stores a as a referrer of image (repository@sha256:…, which must
// exist) and returns it. Attaching the same artifact again gives the same
// referrer and writes nothing new.
func (c Client) Attach(ctx context.Context, image string, kc authn.Keychain, a Artifact) (Referrer, error) {
	subject, err := c.image(image)
	if err != nil {
		return Referrer{}, err
	}
	if a.Type == "" {
		return Referrer{}, errors.New("the artifact has no type")
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	opts := registry.Options(ctx, kc)
	desc, err := remote.Head(subject, opts...)
	if err != nil {
		return Referrer{}, fmt.Errorf("read %s: %w", image, err)
	}
	raw, err := Manifest(*desc, a)
	if err != nil {
		return Referrer{}, err
	}
	repo := subject.Context()
	for _, blob := range []v1.Layer{static.NewLayer(emptyConfig, types.OCIEmptyJSON), static.NewLayer(a.Data, types.MediaType(a.Type))} {
		if err := remote.WriteLayer(repo, blob, opts...); err != nil {
			return Referrer{}, fmt.Errorf("upload the %s artifact of %s: %w", a.Type, image, err)
		}
	}
	digest, size, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return Referrer{}, err
	}
	// go-containerregistry updates the referrers tag schema's index when
	// the registry has no referrers API.
	if err := remote.Put(repo.Digest(digest.String()), rawManifest(raw), opts...); err != nil {
		return Referrer{}, fmt.Errorf("push the %s referrer of %s: %w", a.Type, image, err)
	}
	return Referrer{ArtifactType: a.Type, Digest: digest, Size: size, Annotations: a.Annotations}, nil
}

// Manifest is the referrer manifest of a attached to the image subject
// describes: the same inputs give the same bytes.
func Manifest(subject v1.Descriptor, a Artifact) ([]byte, error) {
	layer, err := descriptor(a.Data, types.MediaType(a.Type))
	if err != nil {
		return nil, err
	}
	return manifestOf(subject, a.Type, layer, a.Annotations)
}

// manifestOf is the referrer manifest of an artifact of type
// artifactType whose one layer layer describes.
func manifestOf(subject v1.Descriptor, artifactType string, layer v1.Descriptor, annotations map[string]string) ([]byte, error) {
	config, err := descriptor(emptyConfig, types.OCIEmptyJSON)
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  artifactType,
		Config:        config,
		Layers:        []v1.Descriptor{layer},
		Subject:       &v1.Descriptor{MediaType: subject.MediaType, Size: subject.Size, Digest: subject.Digest},
	}
	if len(annotations) > 0 {
		m.Annotations = maps.Clone(annotations)
	}
	// encoding/json writes struct fields in order and map keys sorted.
	return json.Marshal(m)
}

// AttachLayer stores layer (its compressed form, as it is: a blob of
// layer's media type) as a referrer of image of type artifactType, for
// artifacts too large to hold in memory (a boot disk). Unlike Attach it
// sets no deadline of its own on the upload, which takes as long as the
// blob needs: ctx bounds it. Attaching the same blob again gives the same
// referrer and uploads nothing.
func (c Client) AttachLayer(ctx context.Context, image string, kc authn.Keychain, artifactType string, layer v1.Layer, annotations map[string]string) (Referrer, error) {
	subject, err := c.image(image)
	if err != nil {
		return Referrer{}, err
	}
	if artifactType == "" {
		return Referrer{}, errors.New("the artifact has no type")
	}
	opts := registry.Options(ctx, kc)
	desc, err := remote.Head(subject, opts...)
	if err != nil {
		return Referrer{}, fmt.Errorf("read %s: %w", image, err)
	}
	digest, err := layer.Digest()
	if err != nil {
		return Referrer{}, err
	}
	size, err := layer.Size()
	if err != nil {
		return Referrer{}, err
	}
	mt, err := layer.MediaType()
	if err != nil {
		return Referrer{}, err
	}
	raw, err := manifestOf(*desc, artifactType, v1.Descriptor{MediaType: mt, Size: size, Digest: digest}, annotations)
	if err != nil {
		return Referrer{}, err
	}
	repo := subject.Context()
	for _, blob := range []v1.Layer{static.NewLayer(emptyConfig, types.OCIEmptyJSON), layer} {
		if err := remote.WriteLayer(repo, blob, opts...); err != nil {
			return Referrer{}, fmt.Errorf("upload the %s artifact of %s: %w", artifactType, image, err)
		}
	}
	md, msize, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return Referrer{}, err
	}
	if err := remote.Put(repo.Digest(md.String()), rawManifest(raw), opts...); err != nil {
		return Referrer{}, fmt.Errorf("push the %s referrer of %s: %w", artifactType, image, err)
	}
	return Referrer{ArtifactType: artifactType, Digest: md, Size: msize, Annotations: annotations}, nil
}

func descriptor(data []byte, mt types.MediaType) (v1.Descriptor, error) {
	h, n, err := v1.SHA256(bytes.NewReader(data))
	return v1.Descriptor{MediaType: mt, Size: n, Digest: h}, err
}

// rawManifest is an OCI image manifest for remote.Put.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// List returns image's referrers, sorted by artifact type and digest.
// The image itself need not exist any more.
func (c Client) List(ctx context.Context, image string, kc authn.Keychain) ([]Referrer, error) {
	subject, err := c.image(image)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	opts := registry.Options(ctx, kc)
	idx, err := remote.Referrers(subject, opts...)
	if err != nil {
		return nil, fmt.Errorf("list the referrers of %s: %w", image, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("list the referrers of %s: %w", image, err)
	}
	var out []Referrer
	for _, d := range im.Manifests {
		r := Referrer{ArtifactType: d.ArtifactType, Digest: d.Digest, Size: d.Size, Annotations: d.Annotations}
		if r.ArtifactType == "" || r.ArtifactType == string(types.OCIEmptyJSON) {
			// Some registries (go-containerregistry's among them) list the
			// config's media type instead of the manifest's artifactType.
			m, err := c.manifest(subject.Context().Digest(d.Digest.String()), opts)
			if err != nil {
				return nil, fmt.Errorf("read referrer %s of %s: %w", d.Digest, image, err)
			}
			r.ArtifactType = m.ArtifactType
			if r.ArtifactType == "" {
				r.ArtifactType = string(m.Config.MediaType)
			}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Referrer) int {
		if c := strings.Compare(a.ArtifactType, b.ArtifactType); c != 0 {
			return c
		}
		return strings.Compare(a.Digest.String(), b.Digest.String())
	})
	return out, nil
}

func (c Client) manifest(ref name.Digest, opts []remote.Option) (*v1.Manifest, error) {
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, err
	}
	return v1.ParseManifest(bytes.NewReader(desc.Manifest))
}

// Read returns the content of referrer r of image: its manifest's one
// layer, checked against its digest, at most MaxArtifactBytes.
func (c Client) Read(ctx context.Context, image string, r Referrer, kc authn.Keychain) ([]byte, error) {
	subject, err := c.image(image)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	opts := registry.Options(ctx, kc)
	ref := subject.Context().Digest(r.Digest.String())
	m, err := c.manifest(ref, opts)
	if err != nil {
		return nil, fmt.Errorf("read referrer %s: %w", ref, err)
	}
	if len(m.Layers) != 1 {
		return nil, fmt.Errorf("referrer %s has %d layers, want one", ref, len(m.Layers))
	}
	if m.Layers[0].Size > MaxArtifactBytes {
		return nil, fmt.Errorf("referrer %s is %d bytes, more than the %d read", ref, m.Layers[0].Size, MaxArtifactBytes)
	}
	blob, err := remote.Layer(subject.Context().Digest(m.Layers[0].Digest.String()), opts...)
	if err != nil {
		return nil, fmt.Errorf("read referrer %s: %w", ref, err)
	}
	// The compressed form is the blob as stored; go-containerregistry
	// checks its digest as it is read.
	rc, err := blob.Compressed()
	if err != nil {
		return nil, fmt.Errorf("read referrer %s: %w", ref, err)
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(io.LimitReader(rc, MaxArtifactBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read referrer %s: %w", ref, err)
	}
	if len(data) > MaxArtifactBytes {
		return nil, fmt.Errorf("referrer %s is more than %d bytes", ref, MaxArtifactBytes)
	}
	return data, nil
}

// DeleteAll deletes image's referrers and, on a registry without the
// referrers API, the index of the referrers tag schema; it returns how
// many referrers it deleted. Referrers already gone are no error.
func (c Client) DeleteAll(ctx context.Context, image string, kc authn.Keychain) (int, error) {
	list, err := c.List(ctx, image, kc)
	if err != nil {
		return 0, err
	}
	subject, err := c.image(image)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	opts := registry.Options(ctx, kc)
	n := 0
	for _, r := range list {
		ref := subject.Context().Digest(r.Digest.String())
		if err := remote.Delete(ref, opts...); err != nil && !registry.IsNotFound(err) {
			return n, fmt.Errorf("delete referrer %s: %w", ref, err)
		}
		n++
	}
	// Deleted by digest: distribution cannot delete a tag alone, and
	// deleting the manifest removes the tag with it.
	tag := subject.Context().Tag(strings.Replace(subject.DigestStr(), ":", "-", 1))
	desc, err := remote.Head(tag, opts...)
	switch {
	case registry.IsNotFound(err):
		return n, nil
	case err != nil:
		return n, fmt.Errorf("look up the referrers index %s: %w", tag, err)
	}
	if err := remote.Delete(subject.Context().Digest(desc.Digest.String()), opts...); err != nil && !registry.IsNotFound(err) {
		return n, fmt.Errorf("delete the referrers index %s: %w", tag, err)
	}
	return n, nil
}
