package direct

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// gzipLevel is fixed so that the same tar always gives the same compressed
// bytes, and so the same layer digest. The configuration layer is small;
// the default level's ratio is worth its time.
const gzipLevel = gzip.DefaultCompression

// configLayer is the configuration layer, compressed once and held
// compressed: that lets a retried upload send the same bytes again, and
// the compressed layer is small even when its content is not (its
// content came gzipped in MachineConfigs that fit in etcd). The
// uncompressed tar is never held: it is written, hashed and compressed in
// one pass, each body streamed from the given layer.
type configLayer struct {
	compressed     []byte
	digest, diffID v1.Hash
	mediaType      types.MediaType
}

var _ v1.Layer = (*configLayer)(nil)

// newConfigLayer checks that the given layer is a whole tar stream and
// compresses the completed layer. The gzip header has no name, no
// modification time and the "unknown" OS, as compress/gzip writes a zero
// Header. Its errors are *StageError.
func newConfigLayer(src *completed, mt types.MediaType) (*configLayer, error) {
	if len(src.data) == 0 {
		return nil, stageErr(StageLayer, "the layer is zero bytes, not a tar")
	}
	if err := checkTar(src.data); err != nil {
		return nil, &StageError{Stage: StageLayer, Err: err}
	}
	var buf bytes.Buffer
	zh, th := sha256.New(), sha256.New()
	zw, err := gzip.NewWriterLevel(io.MultiWriter(&buf, zh), gzipLevel)
	if err != nil {
		return nil, &StageError{Stage: StageLayer, Err: err}
	}
	if err := src.writeTo(io.MultiWriter(th, zw)); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, &StageError{Stage: StageLayer, Err: err}
	}
	return &configLayer{compressed: buf.Bytes(), digest: hashOf(zh), diffID: hashOf(th), mediaType: mt}, nil
}

// checkTar reads every header and body: a truncated or compressed tar
// would otherwise become an image no runtime can unpack.
func checkTar(data []byte) error {
	tr := tar.NewReader(bytes.NewReader(data))
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the layer is not a valid uncompressed tar (entry %d): %w", n+1, err)
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return fmt.Errorf("the layer's tar entry %q is truncated: %w", h.Name, err)
		}
	}
}

func (l *configLayer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *configLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }
func (l *configLayer) Size() (int64, error)     { return int64(len(l.compressed)), nil }
func (l *configLayer) MediaType() (types.MediaType, error) {
	return l.mediaType, nil
}

func (l *configLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.compressed)), nil
}

// Uncompressed decompresses the held layer as it is read.
func (l *configLayer) Uncompressed() (io.ReadCloser, error) {
	return gzip.NewReader(bytes.NewReader(l.compressed))
}
