package ostreeimage

import (
	"context"
	"errors"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Ref prefixes and commit metadata keys.
const (
	// LayerRefPrefix + <diffid hex> is a layer's commit.
	LayerRefPrefix = "strata/layer/"
	// ImageRefPrefix + <manifest digest hex> is an image's commit.
	ImageRefPrefix = "strata/image/"

	// MetaManifestDigest is the image commit's manifest digest
	// ("sha256:..."), as ostree-ext records it.
	MetaManifestDigest = "ostree.manifest-digest"
	// MetaManifest is the image manifest (JSON), as ostree-ext records it.
	MetaManifest = "ostree.manifest"
	// MetaConfig is the image configuration (JSON), as ostree-ext
	// records it.
	MetaConfig = "ostree.container.image-config"
	// MetaFlattened is true on an image commit made from one flattened
	// tree rather than by merging its layer commits.
	MetaFlattened = "strata.flattened"
	// MetaLayerDiffID is a layer commit's diffid ("sha256:...").
	MetaLayerDiffID = "strata.layer.diffid"
	// MetaLayer is what a layer commit holds that matters for merging
	// it onto the layers below it, as words: whiteouts (it deletes
	// paths), external-links (it hard-links to files of lower layers),
	// implicit-dirs (it has entries under directories it has no entry
	// for), etc and usr-etc (it has entries under /etc, /usr/etc).
	MetaLayer = "strata.layer"
)

// Repo is an ostree repository images are imported into. The repository
// must exist (ostree init or ostree admin init-fs); a bare repository
// keeps owners and extended attributes, as bootc's does.
type Repo struct {
	// Path is the repository's directory.
	Path string
	// Ostree is the argv prefix that runs the ostree command line tool;
	// nil means {"ostree"}.
	Ostree []string
	// TempDir is where layers are unpacked before they are committed; ""
	// means Path's tmp directory, on the repository's file system.
	TempDir string
	// Arch is the architecture, as bootc names it (see HostArch), whose
	// kernel arguments Import and Lookup report; "" means HostArch().
	Arch string
	// FactsDir is where the Repo keeps what it learnt of its commits
	// (facts.go), so that it need not run ostree to learn it again; ""
	// keeps nothing.
	FactsDir string
	// Overlay, when set, is asked by Import, before it merges a new
	// image's layers, for a directory to merge over them in the image's
	// commit: "" for none. A flattened image gets none. Image.Overlaid
	// says whether the image's commit has it (the bootc simulator adds
	// what its nodes need to deploy an image in the same ostree run).
	Overlay func(ctx context.Context, layers []v1.Layer) (string, error)
}

// Image is an image imported into a Repo.
type Image struct {
	// Checksum is the image's ostree commit.
	Checksum string
	// Digest is the image's manifest digest, "sha256:<hex>".
	Digest string
	// Version is the image's org.opencontainers.image.version label, or
	// its version label.
	Version string
	// Created is the image's creation time, RFC 3339 in UTC; "" when the
	// image does not say.
	Created string
	// Architecture is the image configuration's architecture (OCI names:
	// amd64, arm64, ...).
	Architecture string
	// Kargs are the image's usr/lib/bootc/kargs.d arguments for the
	// Repo's architecture, in bootc's order.
	Kargs []string
	// Layers are the layer commits, base first.
	Layers []string
	// Flattened is true when the image commit is one flattened tree (its
	// upper layers delete files), not a merge of the layer commits.
	Flattened bool
	// Overlaid is true when Import merged the Repo's Overlay into the
	// image commit; an image Lookup found says false.
	Overlaid bool
}

// ErrNotImported is wrapped by errors about an image that is not in the
// repository.
var ErrNotImported = errors.New("image not imported")

// ImageRef is the ostree ref of the image with that manifest digest.
func ImageRef(digest string) string { return ImageRefPrefix + hexOf(digest) }

// LayerRef is the ostree ref of the layer with that diffid.
func LayerRef(diffID string) string { return LayerRefPrefix + hexOf(diffID) }

func hexOf(digest string) string {
	_, hex, ok := strings.Cut(digest, ":")
	if !ok {
		return digest
	}
	return hex
}
