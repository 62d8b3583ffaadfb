package ostreeimage_test

import (
	"archive/tar"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/test/testregistry"
)

// BenchmarkImport imports an image derived from a base of 4000 files (32
// MB) by one small layer: into a repository that has the base (what a
// node updating to the next configuration does) and into an empty one
// (the whole tree, what every pull cost before layers were reused).
//
//	go test -tags=$(cat hack/go-tags) ./ostreeimage -run '^$' -bench Import -benchtime=5x
func BenchmarkImport(b *testing.B) {
	ctx := context.Background()
	reg := testregistry.Start(b, "")
	content := strings.Repeat("x", 8<<10)
	big := testregistry.TarLayer(b, func(tw *tar.Writer) error {
		for d := range 40 {
			dir := fmt.Sprintf("usr/share/bench/%02d/", d)
			for _, h := range []*tar.Header{
				{Name: "usr/", Typeflag: tar.TypeDir, Mode: 0o755},
				{Name: "usr/share/", Typeflag: tar.TypeDir, Mode: 0o755},
				{Name: "usr/share/bench/", Typeflag: tar.TypeDir, Mode: 0o755},
				{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755},
			} {
				h.ModTime = time.Unix(0, 0)
				if err := tw.WriteHeader(h); err != nil {
					return err
				}
			}
			for f := range 100 {
				// Distinct contents: ostree stores each once.
				data := fmt.Sprintf("%d/%d\n", d, f) + content
				h := &tar.Header{Name: fmt.Sprintf("%sf%03d", dir, f), Typeflag: tar.TypeReg, Mode: 0o644,
					Size: int64(len(data)), ModTime: time.Unix(0, 0)}
				if err := tw.WriteHeader(h); err != nil {
					return err
				}
				if _, err := tw.Write([]byte(data)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	base, err := mutate.AppendLayers(testregistry.Busybox(b), big)
	if err != nil {
		b.Fatal(err)
	}
	derived, err := mutate.AppendLayers(base, testregistry.FilesLayer(b, map[string]string{
		"etc/chrony.conf": "server time.example iburst\n"}))
	if err != nil {
		b.Fatal(err)
	}
	baseImg := remoteImage(b, reg, "os:base", base)
	derivedImg := remoteImage(b, reg, "os:derived", derived)

	b.Run("derived-on-cached-base", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			r := newRepo(b)
			if _, err := r.Import(ctx, baseImg); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := r.Import(ctx, derivedImg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full-tree", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			r := newRepo(b)
			b.StartTimer()
			if _, err := r.Import(ctx, derivedImg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
