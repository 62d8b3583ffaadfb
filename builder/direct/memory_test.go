package direct

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/strata-dev/strata/test/testregistry"
)

// TestLayerIsNotCopied: Build holds no copy of the configuration layer's
// content. The layer, as the renderer makes it, has no entries for the
// parent directories of its files, so Build completes it; completing used
// to hold every body, the rewritten tar and the uncompressed layer at
// once, several times the content for each of the controller's
// concurrent builds. Now the tar is written, hashed and gzipped in one
// pass, each body streamed from the given layer, and only the compressed
// layer is held: a few KiB for 32 MiB of zeros.
func TestLayerIsNotCopied(t *testing.T) {
	const size = 32 << 20
	reg := testregistry.Start(t, regPass)
	base := reg.Push(t, "memory/base:latest", testregistry.Busybox(t))

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/strata-big/zeros", Mode: 0o644, Size: size, ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	req := request(base, reg.Host+"/memory/config:latest", buf.Bytes(), reg)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := Build(context.Background(), req)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("Build of a %d MiB layer allocated %.1f MiB", size>>20, float64(alloc)/(1<<20))
	if alloc > size/4 {
		t.Errorf("Build allocated %.1f MiB for a layer of %d MiB of zeros; it must not copy the layer's content", float64(alloc)/(1<<20), size>>20)
	}

	// The layer pushed is the completed one: the parent directories
	// first, then the file with all its bytes.
	layers, err := pulled(t, reg, res.Image).Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, h.Name)
		if h.Name == "etc/strata-big/zeros" && h.Size != size {
			t.Errorf("the file is %d bytes, want %d", h.Size, size)
		}
	}
	if want := []string{"etc/", "etc/strata-big/", "etc/strata-big/zeros"}; !slices.Equal(got, want) {
		t.Errorf("the pushed layer has %q, want %q", got, want)
	}
}
