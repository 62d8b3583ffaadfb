package vmbootc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/strata-dev/strata/ostreeimage"
)

// Images are imported with package ostreeimage, as bootc's ostree-ext
// imports them: one commit per layer, reused by every image that has the
// layer, so that switching to an image derived from the booted one
// commits only its new layers.

// images is the sysroot's repository as ostreeimage imports into it.
func (s *System) images() ostreeimage.Repo {
	return ostreeimage.Repo{Path: s.repo(), Ostree: s.ostreeArgv()}
}

// imageDigests maps the commit of each imported image to its manifest
// digest, from the image refs (strata/image/<digest hex>): ostree keeps
// each ref in a file of its own, so this costs no ostree run.
func (s *System) imageDigests() (map[string]string, error) {
	dir := filepath.Join(s.repo(), "refs", "heads", filepath.FromSlash(ostreeimage.ImageRefPrefix))
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	digests := map[string]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		csum, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		digests[string(bytes.TrimSpace(csum))] = "sha256:" + e.Name()
	}
	return digests, nil
}

// imageCacheDir keeps, per image commit, what ostreeimage said of it:
// under software emulation every ostree run costs about a second, a
// Lookup three, and status describes every deployment. A commit's
// checksum names its content, so an entry never goes stale; /run starts
// empty at every boot.
const imageCacheDir = "bootc-images"

// describe is the imported image whose commit csum is; nil when csum is
// no imported image's commit. It cannot fail: what ostree cannot say is
// left out of status, as the digest is always known from the ref.
func (s *System) describe(ctx context.Context, csum string, digests map[string]string) *ostreeimage.Image {
	cache := filepath.Join(s.Run, imageCacheDir, csum+".json")
	if data, err := os.ReadFile(cache); err == nil {
		var im ostreeimage.Image
		if json.Unmarshal(data, &im) == nil && im.Checksum == csum {
			return &im
		}
	}
	digest, ok := digests[csum]
	if !ok {
		return nil
	}
	im, ok, err := s.images().Lookup(ctx, digest)
	if err != nil {
		// An image commit ostreeimage did not make (another importer
		// that records no image configuration): its ref still says
		// the digest, which is what the daemon reads.
		return &ostreeimage.Image{Checksum: csum, Digest: digest}
	}
	if !ok || im.Checksum != csum {
		return nil
	}
	s.remember(im)
	return im
}

// remember caches what is known of an image commit; a cache that cannot
// be written only costs time.
func (s *System) remember(im *ostreeimage.Image) {
	data, err := json.Marshal(im)
	if err != nil {
		return
	}
	_ = writeFileAtomic(filepath.Join(s.Run, imageCacheDir, im.Checksum+".json"), data)
}

// removeUnusedImages forgets the images no deployment uses, as bootc
// prunes them; ostree's next prune (every deploy and undeploy) removes
// their objects, and the layers no kept image has go with them.
func (s *System) removeUnusedImages(ctx context.Context) error {
	deps, err := s.Deployments()
	if err != nil {
		return err
	}
	digests, err := s.imageDigests()
	if err != nil {
		return err
	}
	var keep []string
	for _, d := range deps {
		if digest, ok := digests[d.Checksum]; ok {
			keep = append(keep, digest)
		}
	}
	return s.images().RemoveUnused(ctx, keep)
}

// readOrigin reads a deployment's origin file. A deployment that was not
// made from an image (no origin file, or an origin without
// container-image-reference, such as ostree's refspec=) has no image.
func readOrigin(path string) (ostreeimage.Origin, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ostreeimage.Origin{}, nil
	}
	if err != nil {
		return ostreeimage.Origin{}, err
	}
	if !bytes.Contains(data, []byte(ostreeimage.OriginImageKey)) {
		return ostreeimage.Origin{}, nil
	}
	o, err := ostreeimage.ParseOrigin(data)
	if err != nil {
		return ostreeimage.Origin{}, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// deploymentKargs reads the kargs.d arguments of a deployed image from
// its deployment directory, inside it.
func deploymentKargs(dir string) ([]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	return ostreeimage.ReadKargs(root.FS(), ostreeimage.HostArch())
}
