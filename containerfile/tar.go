package containerfile

import (
	"archive/tar"
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"
)

// epoch is every entry's time: with buildah's --timestamp 0 the layer is
// then the same bytes on every build.
var epoch = time.Unix(0, 0).UTC()

// blockSize is tar's block size.
const blockSize = 512

// writeRootfs writes the image's config layer as a tar: entries sorted by
// path, hard links last (their targets must be unpacked first), fixed
// times, numeric owners only, no implicit parent directories (so that the
// base image's directories keep their modes). It returns nil when there is
// nothing to add.
func writeRootfs(entries map[string]*entry) ([]byte, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	list := make([]*entry, 0, len(entries))
	for _, e := range entries {
		list = append(list, e)
	}
	slices.SortFunc(list, func(a, b *entry) int {
		if ah, bh := a.typeflag == tar.TypeLink, b.typeflag == tar.TypeLink; ah != bh {
			if ah {
				return 1
			}
			return -1
		}
		return strings.Compare(a.path, b.path)
	})
	// Most entries take one header block and their data rounded up to a
	// block; growing the buffer as it fills copied the layer several
	// times over.
	size := 2 * blockSize
	for _, e := range list {
		size += blockSize + (len(e.data)+blockSize-1)/blockSize*blockSize
	}
	var buf bytes.Buffer
	buf.Grow(size)
	tw := tar.NewWriter(&buf)
	for _, e := range list {
		h := &tar.Header{
			Typeflag: e.typeflag,
			Name:     strings.TrimPrefix(e.path, "/"),
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.gid,
			ModTime:  epoch,
		}
		switch e.typeflag {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeReg:
			h.Size = int64(len(e.data))
		case tar.TypeSymlink:
			h.Linkname = e.target
		case tar.TypeLink:
			h.Linkname = strings.TrimPrefix(e.target, "/")
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar header for %s: %w", e.path, err)
		}
		if e.typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("tar data for %s: %w", e.path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
