package rollout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/singleflight"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/registry"
)

// imageReadTimeout bounds reading one image's manifest and config.
const imageReadTimeout = 30 * time.Second

// RegistryImages reads images' manifests and configs from their registry,
// with the credentials bootc uses (AuthFile): a few kilobytes, no layer.
//
// Why the layers and not the labels: the labels Strata writes name the
// base image's digest and the rendered config, but nothing names the
// admin stage (the MachineOSConfig's Containerfile content, extensions,
// kernel type) of a configuration-layer build, and the base label says
// nothing of an image built in one Job. The layers below the
// configuration layer are exactly the base and the admin stage: equal
// lists mean the same files outside the configuration layer, whatever
// built them.
type RegistryImages struct {
	Registry registry.Client
	// AuthFile is the host path of the pull secret the daemon writes
	// for bootc; missing means anonymous.
	AuthFile string

	// known remembers the answers for images named by digest, which
	// cannot change: the booted image's is asked at every update, and an
	// image's again when its update decided ahead is decided once more.
	mu    sync.Mutex
	known map[string]string
	// reads joins the reads of one pinned image in flight: a read the
	// daemon starts beside a stage is joined, not repeated, by the
	// decision that follows the stage.
	reads singleflight.Group
}

// maxKnown bounds the answers remembered; a daemon sees a few images.
const maxKnown = 64

var _ Images = (*RegistryImages)(nil)

// BelowConfigLayer lists the digests of image's layers below its last
// one, when the last history entry with a layer is the configuration
// layer Strata appends (controllers/build, v1alpha1.ConfigLayerCreatedBy).
// An image built any other way (one Job, by hand) returns "", which the
// decision takes as a changed image: whatever changed in it may be a
// kernel or anything else.
func (r *RegistryImages) BelowConfigLayer(ctx context.Context, image string) (string, error) {
	if !strings.Contains(image, "@sha256:") {
		return r.read(ctx, image)
	}
	r.mu.Lock()
	below, ok := r.known[image]
	r.mu.Unlock()
	if ok {
		return below, nil
	}
	reading := r.reads.DoChan(image, func() (any, error) {
		below, err := r.read(ctx, image)
		if err == nil {
			r.mu.Lock()
			if r.known == nil || len(r.known) >= maxKnown {
				r.known = map[string]string{}
			}
			r.known[image] = below
			r.mu.Unlock()
		}
		return below, err
	})
	select {
	case res := <-reading:
		below, _ := res.Val.(string)
		return below, res.Err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// read reads image's manifest and config from its registry.
func (r *RegistryImages) read(ctx context.Context, image string) (string, error) {
	kc := authn.NewMultiKeychain()
	if r.AuthFile != "" {
		if _, err := os.Stat(r.AuthFile); err == nil {
			if kc, err = registry.KeychainFromFile(r.AuthFile); err != nil {
				return "", err
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("read registry credentials: %w", err)
		}
	}
	ref, err := r.Registry.ParseReference(image)
	if err != nil {
		return "", fmt.Errorf("parse image reference %q: %w", image, err)
	}
	ctx, cancel := context.WithTimeout(ctx, imageReadTimeout)
	defer cancel()
	img, err := remote.Image(ref, registry.Options(ctx, kc)...)
	if err != nil {
		return "", registry.Explain(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", registry.Explain(err)
	}
	m, err := img.Manifest()
	if err != nil {
		return "", registry.Explain(err)
	}
	last := ""
	for _, h := range cfg.History {
		if !h.EmptyLayer {
			last = h.CreatedBy
		}
	}
	if len(m.Layers) == 0 || !strings.HasPrefix(last, v1alpha1.ConfigLayerCreatedBy) {
		return "", nil
	}
	below := make([]string, 0, len(m.Layers)-1)
	for _, l := range m.Layers[:len(m.Layers)-1] {
		below = append(below, l.Digest.String())
	}
	return strings.Join(below, ","), nil
}
