package direct

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
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

// configLayer is the configuration layer held in memory, compressed once:
// it is a few files, and holding it lets a retried upload send the same
// bytes again.
type configLayer struct {
	uncompressed, compressed []byte
	digest, diffID           v1.Hash
	mediaType                types.MediaType
}

var _ v1.Layer = (*configLayer)(nil)

// newConfigLayer checks that data is a whole tar stream and compresses it.
// The gzip header has no name, no modification time and the "unknown" OS,
// as compress/gzip writes a zero Header.
func newConfigLayer(data []byte, mt types.MediaType) (*configLayer, error) {
	if len(data) == 0 {
		return nil, errors.New("the layer is zero bytes, not a tar")
	}
	if err := checkTar(data); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzipLevel)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	l := &configLayer{uncompressed: data, compressed: buf.Bytes(), mediaType: mt}
	if l.digest, _, err = v1.SHA256(bytes.NewReader(l.compressed)); err != nil {
		return nil, err
	}
	if l.diffID, _, err = v1.SHA256(bytes.NewReader(l.uncompressed)); err != nil {
		return nil, err
	}
	return l, nil
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

func (l *configLayer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.uncompressed)), nil
}
