package direct

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/strata-dev/strata/internal/registry"
)

// Request is one configuration-layer build.
type Request struct {
	// Base is the image to build on, by digest (registry/repo@sha256:…),
	// so that the same Request always gives the same image. It may be an
	// image index; Platform picks the image.
	Base string
	// BaseKeychain reads Base's manifest and config and, when Target is
	// in another registry, its layers. Nil is anonymous.
	BaseKeychain authn.Keychain
	// Platform picks the image when Base is an index, and must match
	// Base's config when it is not. The zero Platform is linux/amd64.
	Platform v1.Platform
	// Layer is the configuration layer: an uncompressed tar. Build
	// completes it as unpacking it into Base in a build would (see the
	// package comment); a layer whose entries' parent directories are all
	// in it, and not under a symlink of the base, is used as given.
	Layer []byte
	// Labels are set on the image config, over the base's.
	Labels map[string]string
	// Annotations are set on the manifest, over the base's.
	Annotations map[string]string
	// CreatedBy is the new history entry's created_by.
	CreatedBy string
	// Target is the registry/repo:tag to push to.
	Target string
	// PushKeychain writes Target (and mounts the base's layers into it).
	// Nil is anonymous.
	PushKeychain authn.Keychain
	// Insecure lists host[:port]s reached over plain HTTP, as
	// registry.Client.Insecure.
	Insecure []string
	// Cache keeps what completing layers learnt of their bases, so that
	// the next build on the same base reads none of its layers. Nil
	// reads them every time a layer needs completing.
	Cache *BaseCache
	// Transport carries every registry request; nil is
	// remote.DefaultTransport. Tests count requests with it.
	Transport http.RoundTripper
}

// Result is a pushed image.
type Result struct {
	// Image is the pushed image by digest: registry/repo@sha256:….
	Image string
	// Digest is the image manifest's digest.
	Digest v1.Hash
	// Layer is the compressed digest of the configuration layer.
	Layer v1.Hash
	// LayerTime is how long checking, completing (with any reading of
	// the base's layers) and compressing the layer took;
	// PushTime how long writing the target took (blobs, config, manifest).
	LayerTime, PushTime time.Duration
}

// epoch is the time of the config and of the new history entry, as
// buildah --timestamp 0 sets them: a build's time must not change its
// digest.
var epoch = v1.Time{Time: time.Unix(0, 0).UTC()}

// userAgent tells registry operators which requests are Strata's.
const userAgent = "strata-direct-builder"

// Build appends req.Layer to req.Base and pushes the image to req.Target,
// uploading only the new layer, the config and the manifest (and, to
// another registry, the base's layers it lacks, streamed). Its errors are
// *StageError.
func Build(ctx context.Context, req Request) (*Result, error) {
	rc := registry.Client{Insecure: req.Insecure}
	baseRef, err := rc.ParseReference(req.Base)
	if err != nil {
		return nil, stageErr(StageBase, "parse base image reference %q: %w", req.Base, err)
	}
	if _, ok := baseRef.(name.Digest); !ok {
		return nil, stageErr(StageBase, "base image %s is not by digest (repo@sha256:…): a tag can move, and the same inputs would then give another image", req.Base)
	}
	targetRef, err := rc.ParseReference(req.Target)
	if err != nil {
		return nil, stageErr(StagePush, "parse target reference %q: %w", req.Target, err)
	}
	if _, ok := targetRef.(name.Tag); !ok {
		return nil, stageErr(StagePush, "target %s is not a tag (registry/repo:tag)", req.Target)
	}

	rt := remote.DefaultTransport
	if req.Transport != nil {
		rt = req.Transport
	}
	common := []remote.Option{remote.WithContext(ctx), remote.WithUserAgent(userAgent), remote.WithTransport(limitManifests{inner: rt})}
	// Reading the base and making the layer hold the most memory: only
	// MaxConcurrentBuilds do it at once.
	release, err := acquire(ctx)
	if err != nil {
		return nil, err
	}
	held := true
	defer func() {
		if held {
			release()
		}
	}()
	base, layerType, err := readBase(baseRef, req.Platform,
		slices.Concat(common, []remote.Option{remote.WithAuthFromKeychain(keychain(req.BaseKeychain)), remote.WithPlatform(platform(req.Platform))}))
	if err != nil {
		return nil, err
	}

	start := time.Now()
	src, err := completeFor(baseRef, base, req.Layer, req.Cache)
	if err != nil {
		return nil, err
	}
	layer, err := newConfigLayer(src, layerType)
	if err != nil {
		return nil, err
	}
	res := &Result{Layer: layer.digest, LayerTime: time.Since(start)}

	img, err := compose(base, layer, req)
	if err != nil {
		return nil, err
	}
	if res.Digest, err = img.Digest(); err != nil {
		return nil, stageErr(StagePush, "compute the image digest: %w", err)
	}
	release()
	held = false

	start = time.Now()
	if err := remote.Write(targetRef, img, slices.Concat(common, []remote.Option{remote.WithAuthFromKeychain(keychain(req.PushKeychain))})...); err != nil {
		return nil, stageErr(StagePush, "push %s: %w", targetRef, explain(err, targetRef.Context().RegistryStr()))
	}
	res.PushTime = time.Since(start)
	res.Image = targetRef.Context().Name() + "@" + res.Digest.String()
	return res, nil
}

// readBase reads the base image's manifest and config, and returns the
// media type its new layer must have to match its manifest's kind. The
// returned image reads its layers lazily and offers them for mounting.
func readBase(ref name.Reference, p v1.Platform, opts []remote.Option) (v1.Image, types.MediaType, error) {
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, "", stageErr(StageBase, "read base image %s: %w", ref, explain(err, ref.Context().RegistryStr()))
	}
	img, err := desc.Image()
	if err != nil {
		return nil, "", stageErr(StageBase, "base image %s for %s: %w", ref, platform(p), explain(err, ref.Context().RegistryStr()))
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, "", stageErr(StageBase, "read base image %s: %w", ref, explain(err, ref.Context().RegistryStr()))
	}
	var layerType types.MediaType
	switch mt {
	case types.DockerManifestSchema2:
		layerType = types.DockerLayer
	case types.OCIManifestSchema1:
		layerType = types.OCILayer
	default:
		return nil, "", stageErr(StageBase, "base image %s has a %s manifest; want a Docker v2 schema 2 or OCI image manifest", ref, mt)
	}
	// The config is read whole, parsed and written again with the new
	// layer: its size is bounded before it is read.
	m, err := img.Manifest()
	if err != nil {
		return nil, "", stageErr(StageBase, "read base image %s: %w", ref, explain(err, ref.Context().RegistryStr()))
	}
	if m.Config.Size < 0 || m.Config.Size > MaxBaseConfigSize {
		return nil, "", stageErr(StageBase, "base image %s has a config of %d bytes; a base image's config may have at most %d bytes (%d KiB)",
			ref, m.Config.Size, MaxBaseConfigSize, MaxBaseConfigSize>>10)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, "", stageErr(StageBase, "read the config of base image %s: %w", ref, explain(err, ref.Context().RegistryStr()))
	}
	// A single-platform base is not chosen by platform; building another
	// architecture's image on it would only fail on the nodes.
	want := platform(p)
	if (cf.OS != "" && cf.OS != want.OS) || (cf.Architecture != "" && cf.Architecture != want.Architecture) {
		return nil, "", stageErr(StageBase, "base image %s is %s/%s, not %s", ref, cf.OS, cf.Architecture, want)
	}
	return img, layerType, nil
}

// completeFor completes layer for base, reading the base's layers only
// for what cache does not know.
func completeFor(ref name.Reference, base v1.Image, layer []byte, cache *BaseCache) (*completed, error) {
	digest, err := base.Digest()
	if err != nil {
		return nil, stageErr(StageBase, "read base image %s: %w", ref, err)
	}
	tree := cache.known(digest)
	return completeLayer(layer, tree, func(need map[string]bool) error {
		read := map[string]treeEntry{}
		if err := readBaseTree(base, need, read); err != nil {
			return stageErr(StageBase, "read the layers of base image %s for the parent directories of the configuration layer's entries: %w", ref, explain(err, ref.Context().RegistryStr()))
		}
		maps.Copy(tree, read)
		cache.learn(digest, read)
		return nil
	})
}

// compose is the base with the layer appended, its history entry, the
// epoch as creation time, the labels and the annotations.
func compose(base v1.Image, layer *configLayer, req Request) (v1.Image, error) {
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: epoch, CreatedBy: req.CreatedBy},
	})
	if err != nil {
		return nil, stageErr(StagePush, "append the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, stageErr(StagePush, "append the layer: %w", err)
	}
	cf.Created = epoch
	if len(req.Labels) > 0 {
		if cf.Config.Labels == nil {
			cf.Config.Labels = map[string]string{}
		}
		// The config is JSON with sorted keys: the map's order does not
		// reach the digest.
		maps.Copy(cf.Config.Labels, req.Labels)
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, stageErr(StagePush, "set the image config: %w", err)
	}
	if len(req.Annotations) > 0 {
		with, ok := mutate.Annotations(img, req.Annotations).(v1.Image)
		if !ok {
			return nil, stageErr(StagePush, "set the manifest annotations: not an image")
		}
		img = with
	}
	return img, nil
}

// platform is p, or linux/amd64 when p is zero.
func platform(p v1.Platform) v1.Platform {
	if p.OS == "" {
		p.OS = "linux"
	}
	if p.Architecture == "" {
		p.Architecture = "amd64"
	}
	return p
}

func keychain(kc authn.Keychain) authn.Keychain {
	if kc == nil {
		return authn.NewMultiKeychain()
	}
	return kc
}
