package direct

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// SyntheticLayerMiB is the largest layer of a SyntheticBase. OS images
// have layers of this order; tests that check that no layer is held in
// memory set their bound below it.
const SyntheticLayerMiB = 64

// SyntheticBase is a linux/amd64 Docker v2 schema 2 image of sizeMiB MiB
// of random bytes in layers of at most SyntheticLayerMiB MiB, each a tar
// of one file: a stand-in for a large base image in tests and
// benchmarks. The same size and seed give the same image. Nothing is held
// in memory: a layer's bytes are generated again each time they are read,
// and its digests are computed on first use by one pass over them. The
// data is random and so incompressible; the layers are gzip streams of
// stored blocks, which costs no compression time.
func SyntheticBase(sizeMiB int, seed uint64) (v1.Image, error) {
	if sizeMiB <= 0 {
		return nil, fmt.Errorf("synthetic base of %d MiB: want at least 1", sizeMiB)
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: "amd64", OS: "linux", Created: epoch,
		RootFS: v1.RootFS{Type: "layers"},
		Config: v1.Config{Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}},
	})
	if err != nil {
		return nil, err
	}
	var adds []mutate.Addendum
	for i := 0; sizeMiB > 0; i++ {
		n := min(sizeMiB, SyntheticLayerMiB)
		sizeMiB -= n
		l := &syntheticLayer{index: i, size: int64(n) << 20}
		binary.LittleEndian.PutUint64(l.seed[:], seed)
		binary.LittleEndian.PutUint64(l.seed[8:], uint64(i))
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{
			Created: epoch, CreatedBy: fmt.Sprintf("strata synthetic layer %d: %d MiB", i, n)}})
	}
	return mutate.Append(img, adds...)
}

// syntheticLayer is one tar entry of size random bytes from a ChaCha8
// stream keyed by seed.
type syntheticLayer struct {
	index int
	size  int64
	seed  [32]byte

	once           sync.Once
	digest, diffID v1.Hash
	compressedSize int64
	err            error
}

var _ v1.Layer = (*syntheticLayer)(nil)

// write writes the layer's tar to w, gzipped when compressed is set.
func (l *syntheticLayer) write(w io.Writer, compressed bool) error {
	var zw *gzip.Writer
	if compressed {
		var err error
		if zw, err = gzip.NewWriterLevel(w, gzip.NoCompression); err != nil {
			return err
		}
		w = zw
	}
	if err := l.writeTar(w); err != nil {
		return err
	}
	if zw != nil {
		return zw.Close()
	}
	return nil
}

func (l *syntheticLayer) writeTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("strata-synthetic/%d.bin", l.index),
		Mode: 0o644, Size: l.size, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, rand.NewChaCha8(l.seed), l.size); err != nil {
		return err
	}
	return tw.Close()
}

// sums computes both digests and the compressed size in one pass over the
// bytes, once.
func (l *syntheticLayer) sums() error {
	l.once.Do(func() {
		zh, th := sha256.New(), sha256.New()
		n := &countWriter{w: zh}
		zw, err := gzip.NewWriterLevel(n, gzip.NoCompression)
		if err != nil {
			l.err = err
			return
		}
		if err := l.writeTar(io.MultiWriter(th, zw)); err != nil {
			l.err = err
			return
		}
		if err := zw.Close(); err != nil {
			l.err = err
			return
		}
		l.digest, l.diffID, l.compressedSize = hashOf(zh), hashOf(th), n.n
	})
	return l.err
}

func hashOf(h hash.Hash) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", h.Sum(nil))}
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Go leaves unspecified whether a field in a return list is read before
// or after a call in it: each getter calls sums first.

func (l *syntheticLayer) Digest() (v1.Hash, error) {
	err := l.sums()
	return l.digest, err
}

func (l *syntheticLayer) DiffID() (v1.Hash, error) {
	err := l.sums()
	return l.diffID, err
}

func (l *syntheticLayer) Size() (int64, error) {
	err := l.sums()
	return l.compressedSize, err
}

func (l *syntheticLayer) MediaType() (types.MediaType, error) {
	return types.DockerLayer, nil
}

// Compressed and Uncompressed stream the bytes through a pipe as they are
// generated; closing the reader early stops the generator.
func (l *syntheticLayer) Compressed() (io.ReadCloser, error) { return l.pipe(true), nil }

func (l *syntheticLayer) Uncompressed() (io.ReadCloser, error) { return l.pipe(false), nil }

func (l *syntheticLayer) pipe(compressed bool) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(l.write(pw, compressed)) }()
	return pr
}
