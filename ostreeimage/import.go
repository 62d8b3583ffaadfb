package ostreeimage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Import commits img into the repository, unless its image commit is
// already there, and returns it. Layers already committed are reused
// without being downloaded.
func (r Repo) Import(ctx context.Context, img v1.Image) (*Image, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("image digest: %w", err)
	}
	if im, ok, err := r.Lookup(ctx, digest.String()); ok || err != nil {
		return im, err
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: manifest: %w", digest, err)
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: configuration: %w", digest, err)
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawConfig))
	if err != nil {
		return nil, fmt.Errorf("image %s: configuration: %w", digest, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("image %s: layers: %w", digest, err)
	}
	if len(layers) == 0 {
		return nil, fmt.Errorf("image %s has no layers", digest)
	}
	if err := os.MkdirAll(r.tempDir(), 0o700); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(r.tempDir(), "ostreeimage-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(work) }()

	im := imageOf(digest.String(), cfg)
	var etc, usrEtc bool
	flatten := false
	for i, l := range layers {
		diffID, err := l.DiffID()
		if err != nil {
			return nil, fmt.Errorf("image %s: layer %d: %w", digest, i, err)
		}
		csum, flags, err := r.layer(ctx, l, diffID.String(), work)
		if err != nil {
			return nil, fmt.Errorf("image %s: layer %s: %w", digest, diffID, err)
		}
		im.Layers = append(im.Layers, csum)
		etc, usrEtc = etc || flags.Etc, usrEtc || flags.UsrEtc
		if i > 0 && !flags.mergeable() {
			flatten = true
		}
	}
	if etc && usrEtc {
		return nil, fmt.Errorf("image %s: %w", digest, errEtcAndUsrEtc)
	}

	args := []string{"commit", "--branch=" + ImageRef(im.Digest), "--parent=none",
		"--timestamp=" + timestamp(cfg), "--subject=" + im.Digest,
		"--add-metadata-string=" + MetaManifestDigest + "=" + im.Digest,
		"--add-metadata-string=" + MetaManifest + "=" + string(manifest),
		"--add-metadata-string=" + MetaConfig + "=" + string(rawConfig)}
	if !flatten {
		merge := args
		for _, c := range im.Layers {
			merge = append(merge, "--tree=ref="+c)
		}
		overlay := ""
		if r.Overlay != nil {
			if overlay, err = r.Overlay(ctx, layers); err != nil {
				return nil, fmt.Errorf("image %s: overlay: %w", digest, err)
			}
			if overlay != "" {
				merge = append(merge, "--tree=dir="+overlay)
			}
		}
		out, err := r.ostree(ctx, append(merge, "--add-metadata="+MetaFlattened+"=false")...)
		if err == nil {
			im.Checksum, im.Overlaid = strings.TrimSpace(out), overlay != ""
			r.keep(im.Checksum, MetaFlattened, "false")
		} else {
			// ostree merges trees but does not replace a directory by a
			// file or a file by a directory, as an upper layer may.
			flatten = true
		}
	}
	if flatten {
		im.Flattened = true
		tree := filepath.Join(work, "flat")
		if err := os.Mkdir(tree, 0o755); err != nil {
			return nil, err
		}
		rc := mutate.Extract(img)
		_, err := unpack(rc, tree, false)
		_ = rc.Close()
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", digest, err)
		}
		out, err := r.ostree(ctx, append(args, "--tree=dir="+tree, "--add-metadata="+MetaFlattened+"=true")...)
		if err != nil {
			return nil, err
		}
		im.Checksum = strings.TrimSpace(out)
		r.keep(im.Checksum, MetaFlattened, "true")
	}
	r.keep(im.Checksum, MetaConfig, string(rawConfig))
	if im.Kargs, err = r.imageKargs(ctx, im); err != nil {
		return nil, fmt.Errorf("image %s: %w", digest, err)
	}
	return im, nil
}

// layer returns the commit of the layer with that diffid, committing it
// first if the repository does not have it.
func (r Repo) layer(ctx context.Context, l v1.Layer, diffID, work string) (string, layerFlags, error) {
	ref := LayerRef(diffID)
	if csum, ok, err := r.revParse(ref); err != nil || ok {
		if err != nil {
			return "", layerFlags{}, err
		}
		words, err := r.metadata(ctx, csum, MetaLayer)
		if err != nil {
			return "", layerFlags{}, err
		}
		return csum, parseLayerFlags(words), nil
	}
	tree, err := os.MkdirTemp(work, "layer-")
	if err != nil {
		return "", layerFlags{}, err
	}
	defer func() { _ = os.RemoveAll(tree) }()
	// The tree's root is the image's root; MkdirTemp made it 0700.
	if err := os.Chmod(tree, 0o755); err != nil {
		return "", layerFlags{}, err
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return "", layerFlags{}, err
	}
	flags, err := unpack(rc, tree, true)
	_ = rc.Close()
	if err != nil {
		return "", layerFlags{}, err
	}
	out, err := r.ostree(ctx, "commit", "--branch="+ref, "--parent=none", "--tree=dir="+tree,
		"--timestamp="+time.Unix(0, 0).UTC().Format(time.RFC3339), "--subject="+diffID,
		"--add-metadata-string="+MetaLayerDiffID+"="+diffID,
		"--add-metadata-string="+MetaLayer+"="+flags.String())
	if err != nil {
		return "", layerFlags{}, err
	}
	csum := strings.TrimSpace(out)
	r.keep(csum, MetaLayer, flags.String())
	// Kept now, from the tree at hand: with facts, the image's kernel
	// arguments are its layers' kargs.d merged.
	if r.FactsDir != "" {
		if _, err := r.layerKargsOf(ctx, csum, tree); err != nil {
			return "", layerFlags{}, err
		}
	}
	return csum, flags, nil
}

// timestamp is the image commit's time: the image's creation time, so
// that the same image gives the same commit.
func timestamp(cfg *v1.ConfigFile) string {
	t := time.Unix(0, 0)
	if !cfg.Created.IsZero() {
		t = cfg.Created.Time
	}
	return t.UTC().Format(time.RFC3339)
}

// imageOf is what the image's configuration says of it.
func imageOf(digest string, cfg *v1.ConfigFile) *Image {
	im := &Image{Digest: digest, Architecture: cfg.Architecture,
		Version: cfg.Config.Labels["org.opencontainers.image.version"]}
	if im.Version == "" {
		im.Version = cfg.Config.Labels["version"]
	}
	if !cfg.Created.IsZero() {
		im.Created = cfg.Created.UTC().Format(time.RFC3339)
	}
	return im
}

// Lookup returns the imported image with that manifest digest
// ("sha256:<hex>"); ok is false when it has not been imported.
func (r Repo) Lookup(ctx context.Context, digest string) (img *Image, ok bool, err error) {
	csum, ok, err := r.revParse(ImageRef(digest))
	if err != nil || !ok {
		return nil, false, err
	}
	cfg, err := r.config(ctx, csum)
	if err != nil {
		return nil, false, err
	}
	im := imageOf(digest, cfg)
	im.Checksum = csum
	flattened, err := r.metadata(ctx, csum, MetaFlattened)
	if err != nil {
		return nil, false, err
	}
	im.Flattened = flattened == "true"
	for _, d := range cfg.RootFS.DiffIDs {
		c, _, err := r.revParse(LayerRef(d.String()))
		if err != nil {
			return nil, false, err
		}
		im.Layers = append(im.Layers, c)
	}
	if im.Kargs, err = r.imageKargs(ctx, im); err != nil {
		return nil, false, fmt.Errorf("image %s: %w", digest, err)
	}
	return im, true, nil
}

// kargs reads the kargs.d files of a commit, as ReadKargs reads them
// from a tree: checked out (hard links into the repository, one ostree
// run), then read.
func (r Repo) kargs(ctx context.Context, csum string) ([]string, error) {
	if err := os.MkdirAll(r.tempDir(), 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(r.tempDir(), "kargs-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(path.Dir(KargsDir))), 0o755); err != nil {
		return nil, err
	}
	_, err = r.ostree(ctx, "checkout", "--subpath=/"+KargsDir, csum, filepath.Join(dir, filepath.FromSlash(KargsDir)))
	if errors.Is(err, errNoSuchPath) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	return ReadKargs(root.FS(), r.arch())
}

// RemoveUnused deletes the refs of the images not in keep (manifest
// digests) and of the layers none of the kept images has, as bootc
// prunes the images no deployment uses, and the caller's own refs also,
// in the same ostree run. ostree removes their objects at its next
// prune (ostree admin undeploy prunes).
func (r Repo) RemoveUnused(ctx context.Context, keep []string, also ...string) error {
	kept := map[string]bool{}
	for _, d := range keep {
		kept[ImageRef(d)] = true
	}
	images, err := r.refs(ImageRefPrefix)
	if err != nil {
		return err
	}
	var unused []string
	for _, ref := range images {
		if !kept[ref] {
			unused = append(unused, ref)
		}
	}
	if len(unused) == 0 {
		// Every layer ref came with an image ref: no image gone, no
		// layer unused.
		return r.deleteRefs(also)
	}
	used := map[string]bool{}
	for ref := range kept {
		csum, ok, err := r.revParse(ref)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		cfg, err := r.config(ctx, csum)
		if err != nil {
			return err
		}
		for _, id := range cfg.RootFS.DiffIDs {
			used[LayerRef(id.String())] = true
		}
	}
	layers, err := r.refs(LayerRefPrefix)
	if err != nil {
		return err
	}
	for _, ref := range layers {
		if !used[ref] {
			unused = append(unused, ref)
		}
	}
	return r.deleteRefs(append(unused, also...))
}

// deleteRefs deletes refs and forgets the facts of their commits. A
// local ref is a file of its own under refs/heads, and deleting one is
// removing that file, which is all `ostree refs --delete` does for it:
// done here, it costs no ostree run (one per stage on a node).
func (r Repo) deleteRefs(refs []string) error {
	var gone []string
	for _, ref := range refs {
		csum, ok, err := r.revParse(ref)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := os.Remove(r.refFile(ref)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete ref %s: %w", ref, err)
		}
		gone = append(gone, csum)
	}
	r.forget(gone)
	return nil
}

// refs lists the refs under prefix (one level).
func (r Repo) refs(prefix string) ([]string, error) {
	entries, err := os.ReadDir(r.refFile(prefix))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			out = append(out, prefix+e.Name())
		}
	}
	return out, nil
}

// config is the image configuration an image commit records.
func (r Repo) config(ctx context.Context, csum string) (*v1.ConfigFile, error) {
	raw, err := r.metadata(ctx, csum, MetaConfig)
	if err != nil {
		return nil, err
	}
	var cfg v1.ConfigFile
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return nil, fmt.Errorf("image commit %s: %s: %w", csum, MetaConfig, err)
	}
	return &cfg, nil
}

// errNoSuchPath is ostree's "No such file or directory" for a path of a
// commit.
var errNoSuchPath = errors.New("no such path in the commit")

// ostree runs the ostree command on the repository and returns its
// standard output.
func (r Repo) ostree(ctx context.Context, args ...string) (string, error) {
	argv := r.Ostree
	if len(argv) == 0 {
		argv = []string{"ostree"}
	}
	argv = append(append(append([]string{}, argv...), args[0], "--repo="+r.Path), args[1:]...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "No such file or directory") && (args[0] == "ls" || args[0] == "checkout") {
			err = errNoSuchPath
		}
		return "", fmt.Errorf("ostree %s: %w: %s", args[0], err, msg)
	}
	return stdout.String(), nil
}

// refFile is the file of a local ref (or the directory of a ref
// prefix): ostree keeps each ref in a file of its own under refs/heads.
func (r Repo) refFile(ref string) string {
	return filepath.Join(r.Path, "refs", "heads", filepath.FromSlash(ref))
}

// revParse resolves a ref of the repository (ostree keeps each in a file
// of its own); ok is false when there is no such ref.
func (r Repo) revParse(ref string) (csum string, ok bool, err error) {
	data, err := os.ReadFile(r.refFile(ref))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(string(data)), true, nil
}

func (r Repo) tempDir() string {
	if r.TempDir != "" {
		return r.TempDir
	}
	return filepath.Join(r.Path, "tmp")
}

func (r Repo) arch() string {
	if r.Arch != "" {
		return r.Arch
	}
	return HostArch()
}
