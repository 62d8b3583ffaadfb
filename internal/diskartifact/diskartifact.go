package diskartifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/referrers"
	"github.com/strata-dev/strata/internal/registry"
)

// ArtifactType and LayerMediaType are the API's (v1alpha1).
const (
	ArtifactType   = v1alpha1.BootDiskArtifactType
	LayerMediaType = v1alpha1.BootDiskLayerMediaType
)

// Annotations of the artifact's manifest.
const (
	// AnnotationSize is the raw disk's size in bytes, decimal.
	AnnotationSize = "dev.strata.bootdisk.size"
	// AnnotationRawDigest is the raw disk's sha256 digest
	// (sha256:<hex>).
	AnnotationRawDigest = "dev.strata.bootdisk.raw-digest"
	// AnnotationTitle names the file a download is suggested to write.
	AnnotationTitle = "org.opencontainers.image.title"
)

// FileName is the suggested name of a downloaded disk.
const FileName = "disk.raw"

// Disk is a published boot disk.
type Disk struct {
	// Artifact is the artifact's manifest, repository@sha256:….
	Artifact string `json:"artifact"`
	// Image is the image the disk holds (the artifact's subject), by digest.
	Image string `json:"image"`
	// Size is the raw disk's size in bytes.
	Size int64 `json:"size"`
	// RawDigest is the raw disk's sha256 digest.
	RawDigest string `json:"rawDigest"`
	// CompressedSize is the compressed layer's size in bytes.
	CompressedSize int64 `json:"compressedSize"`
}

// Publish compresses the raw disk at path into a file beside it (removed
// again) and attaches it to image (repository@sha256:…) with kc.
func Publish(ctx context.Context, c referrers.Client, image string, kc authn.Keychain, path string) (Disk, error) {
	in, err := os.Open(path)
	if err != nil {
		return Disk{}, err
	}
	defer func() { _ = in.Close() }()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bootdisk-*.zst")
	if err != nil {
		return Disk{}, err
	}
	defer func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }()
	raw, comp := sha256.New(), sha256.New()
	enc, err := zstd.NewWriter(io.MultiWriter(tmp, comp), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return Disk{}, err
	}
	size, err := io.Copy(enc, io.TeeReader(in, raw))
	if err != nil {
		enc.Close()
		return Disk{}, fmt.Errorf("compress %s: %w", path, err)
	}
	if err := enc.Close(); err != nil {
		return Disk{}, fmt.Errorf("compress %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return Disk{}, err
	}
	st, err := tmp.Stat()
	if err != nil {
		return Disk{}, err
	}
	digest := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(comp.Sum(nil))}
	layer, err := partial.CompressedToLayer(&fileBlob{path: tmp.Name(), digest: digest, size: st.Size()})
	if err != nil {
		return Disk{}, err
	}
	d := Disk{
		Image:          image,
		Size:           size,
		RawDigest:      "sha256:" + hex.EncodeToString(raw.Sum(nil)),
		CompressedSize: st.Size(),
	}
	ref, err := c.AttachLayer(ctx, image, kc, ArtifactType, layer, map[string]string{
		AnnotationSize:      strconv.FormatInt(d.Size, 10),
		AnnotationRawDigest: d.RawDigest,
		AnnotationTitle:     FileName,
	})
	if err != nil {
		return Disk{}, err
	}
	d.Artifact = repository(image) + "@" + ref.Digest.String()
	return d, nil
}

// fileBlob is a compressed blob in a file, for remote.WriteLayer.
type fileBlob struct {
	path   string
	digest v1.Hash
	size   int64
}

func (b *fileBlob) Digest() (v1.Hash, error)            { return b.digest, nil }
func (b *fileBlob) Size() (int64, error)                { return b.size, nil }
func (b *fileBlob) MediaType() (types.MediaType, error) { return LayerMediaType, nil }
func (b *fileBlob) Compressed() (io.ReadCloser, error)  { return os.Open(b.path) }
func (b *fileBlob) DiffID() (v1.Hash, error) {
	return v1.Hash{}, errors.New("a boot disk has no diff ID")
}
func (b *fileBlob) Uncompressed() (io.ReadCloser, error) {
	return nil, errors.New("a boot disk is not a tar layer")
}

// repository strips @digest or :tag of a reference.
func repository(image string) string {
	for i := len(image) - 1; i >= 0; i-- {
		switch image[i] {
		case '@':
			return image[:i]
		case '/':
			return image
		}
	}
	return image
}

// Find returns the boot disk attached to image (repository@sha256:…);
// false when it has none. With several (a disk made again), the one
// listed last in digest order is returned: they hold the same image.
func Find(ctx context.Context, c referrers.Client, image string, kc authn.Keychain) (Disk, bool, error) {
	list, err := c.List(ctx, image, kc)
	if err != nil {
		return Disk{}, false, err
	}
	var found *referrers.Referrer
	for i := range list {
		if list[i].ArtifactType == ArtifactType {
			found = &list[i]
		}
	}
	if found == nil {
		return Disk{}, false, nil
	}
	d, _, err := Describe(ctx, c.Registry, repository(image)+"@"+found.Digest.String(), kc)
	if err != nil {
		return Disk{}, false, err
	}
	return d, true, nil
}

// Describe reads the artifact's manifest (repository@sha256:…) and
// returns what it says of the disk and the layer to download.
func Describe(ctx context.Context, reg registry.Client, artifact string, kc authn.Keychain) (Disk, v1.Descriptor, error) {
	ref, err := reg.ParseReference(artifact)
	if err != nil {
		return Disk{}, v1.Descriptor{}, fmt.Errorf("parse artifact reference %q: %w", artifact, err)
	}
	dref, ok := ref.(name.Digest)
	if !ok {
		return Disk{}, v1.Descriptor{}, fmt.Errorf("artifact %s is not by digest (repository@sha256:…)", artifact)
	}
	desc, err := remote.Get(dref, registry.Options(ctx, kc)...)
	if err != nil {
		return Disk{}, v1.Descriptor{}, fmt.Errorf("read artifact %s: %w", artifact, err)
	}
	// remote.Get checks the manifest against the digest it asked for.
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return Disk{}, v1.Descriptor{}, fmt.Errorf("read artifact %s: %w", artifact, err)
	}
	if m.ArtifactType != ArtifactType {
		return Disk{}, v1.Descriptor{}, fmt.Errorf("artifact %s is a %q, not a boot disk (%s)", artifact, m.ArtifactType, ArtifactType)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != LayerMediaType {
		return Disk{}, v1.Descriptor{}, fmt.Errorf("artifact %s does not have one %s layer", artifact, LayerMediaType)
	}
	size, err := strconv.ParseInt(m.Annotations[AnnotationSize], 10, 64)
	if err != nil || size < 0 {
		return Disk{}, v1.Descriptor{}, fmt.Errorf("artifact %s: annotation %s is %q, not a size", artifact, AnnotationSize, m.Annotations[AnnotationSize])
	}
	rawDigest := m.Annotations[AnnotationRawDigest]
	if _, err := v1.NewHash(rawDigest); err != nil {
		return Disk{}, v1.Descriptor{}, fmt.Errorf("artifact %s: annotation %s: %w", artifact, AnnotationRawDigest, err)
	}
	d := Disk{Artifact: artifact, Size: size, RawDigest: rawDigest, CompressedSize: m.Layers[0].Size}
	if m.Subject != nil {
		d.Image = dref.Context().Name() + "@" + m.Subject.Digest.String()
	}
	return d, m.Layers[0], nil
}

// Download writes the boot disk of artifact (repository@sha256:…) to
// out, decompressed, once the compressed blob matched its digest and the
// raw disk its size and digest; out is written as a temporary file beside
// it and renamed, so it never holds a disk that did not verify. progress,
// if not nil, is told the compressed bytes read so far.
func Download(ctx context.Context, reg registry.Client, artifact string, kc authn.Keychain, out string, progress func(int64)) (Disk, error) {
	d, layer, err := Describe(ctx, reg, artifact, kc)
	if err != nil {
		return Disk{}, err
	}
	ref, _ := reg.ParseReference(artifact)
	blob, err := remote.Layer(ref.Context().Digest(layer.Digest.String()), registry.Options(ctx, kc)...)
	if err != nil {
		return Disk{}, fmt.Errorf("read the disk of %s: %w", artifact, err)
	}
	// go-containerregistry checks the blob against its digest as it is
	// read, and fails the read that ends it if it does not match.
	rc, err := blob.Compressed()
	if err != nil {
		return Disk{}, fmt.Errorf("read the disk of %s: %w", artifact, err)
	}
	defer func() { _ = rc.Close() }()
	var src io.Reader = rc
	if progress != nil {
		src = &counter{r: rc, fn: progress}
	}
	dec, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return Disk{}, err
	}
	defer dec.Close()
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".part-*")
	if err != nil {
		return Disk{}, err
	}
	defer func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }()
	raw := sha256.New()
	n, err := writeSparse(tmp, io.TeeReader(dec, raw), d.Size)
	if err != nil {
		return Disk{}, fmt.Errorf("download the disk of %s: %w", artifact, err)
	}
	// Read to the end of the blob, so that its digest is checked.
	if _, err := io.Copy(io.Discard, src); err != nil {
		return Disk{}, fmt.Errorf("download the disk of %s: %w", artifact, err)
	}
	if n != d.Size {
		return Disk{}, fmt.Errorf("the disk of %s is %d bytes, its annotation %s says %d", artifact, n, AnnotationSize, d.Size)
	}
	if got := "sha256:" + hex.EncodeToString(raw.Sum(nil)); got != d.RawDigest {
		return Disk{}, fmt.Errorf("the disk of %s has digest %s, its annotation %s says %s", artifact, got, AnnotationRawDigest, d.RawDigest)
	}
	if err := tmp.Sync(); err != nil {
		return Disk{}, err
	}
	if err := tmp.Close(); err != nil {
		return Disk{}, err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return Disk{}, err
	}
	return d, nil
}

// writeSparse copies r to f, seeking over blocks of zeros instead of
// writing them, and sets f's size to what was read. It reads at most
// limit+1 bytes: a stream longer than the disk is an error found without
// writing it all.
func writeSparse(f *os.File, r io.Reader, limit int64) (int64, error) {
	const block = 64 << 10
	buf := make([]byte, block)
	zero := make([]byte, block)
	var n int64
	r = io.LimitReader(r, limit+1)
	for {
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			if bytes.Equal(buf[:k], zero[:k]) {
				if _, err := f.Seek(int64(k), io.SeekCurrent); err != nil {
					return n, err
				}
			} else if _, err := f.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return n, err
		}
	}
	return n, f.Truncate(n)
}

// counter tells fn how many bytes were read so far.
type counter struct {
	r  io.Reader
	n  int64
	fn func(int64)
}

func (c *counter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	c.fn(c.n)
	return k, err
}
