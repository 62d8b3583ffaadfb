package containerfile

import (
	"archive/tar"
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/strata-dev/strata/nodeconfig"
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
func writeRootfs(entries map[string]*nodeconfig.Entry) ([]byte, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	list := make([]*nodeconfig.Entry, 0, len(entries))
	for _, e := range entries {
		list = append(list, e)
	}
	slices.SortFunc(list, func(a, b *nodeconfig.Entry) int {
		if ah, bh := a.Type == tar.TypeLink, b.Type == tar.TypeLink; ah != bh {
			if ah {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Path, b.Path)
	})
	// Most entries take one header block and their data rounded up to a
	// block; growing the buffer as it fills copied the layer several
	// times over.
	size := 2 * blockSize
	for _, e := range list {
		size += blockSize + (len(e.Data)+blockSize-1)/blockSize*blockSize
	}
	var buf bytes.Buffer
	buf.Grow(size)
	tw := tar.NewWriter(&buf)
	for _, e := range list {
		h := &tar.Header{
			Typeflag: e.Type,
			Name:     strings.TrimPrefix(e.Path, "/"),
			Mode:     e.Mode,
			Uid:      e.UID,
			Gid:      e.GID,
			ModTime:  epoch,
		}
		switch e.Type {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeReg:
			h.Size = int64(len(e.Data))
		case tar.TypeSymlink:
			h.Linkname = e.Target
		case tar.TypeLink:
			h.Linkname = strings.TrimPrefix(e.Target, "/")
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar header for %s: %w", e.Path, err)
		}
		if e.Type == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, fmt.Errorf("tar data for %s: %w", e.Path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
