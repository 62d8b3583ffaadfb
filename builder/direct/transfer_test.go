package direct

import (
	"archive/tar"
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/strata-dev/strata/test/testregistry"
)

// TestBaseLayersNotDownloaded: to the base's registry, Build reads no
// byte of a base layer. In the base's repository the layers are there; in
// another repository the registry mounts them.
func TestBaseLayersNotDownloaded(t *testing.T) {
	reg := testregistry.Start(t, regPass)
	baseImg, err := mutate.AppendLayers(testregistry.Busybox(t),
		testregistry.FilesLayer(t, map[string]string{"usr/share/admin/stage": "admin stage\n"}))
	if err != nil {
		t.Fatal(err)
	}
	base := reg.Push(t, "test/base:latest", baseImg)
	baseLayers, _ := layerDigests(t, baseImg)

	for _, c := range []struct{ name, repo string }{
		{"same repository", "test/base"},
		{"other repository", "test/configs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			req := request(base, reg.Host+"/"+c.repo+":config", testLayer(t, c.name), reg)
			req.Transport = rec
			res, err := Build(context.Background(), req)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if gets := rec.calls(blobCalls("GET", reg.Host, baseLayers)); len(gets) != 0 {
				t.Errorf("Build read base layers: %+v", gets)
			}
			// Only the layer and the config are uploaded: each upload ends
			// with a PUT naming the blob's digest.
			img := pulled(t, reg, res.Image)
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			var committed []string
			for _, c := range rec.calls(func(c call) bool { return c.Method == "PUT" && strings.Contains(c.Path, "/blobs/uploads/") }) {
				q, _ := url.ParseQuery(c.Query)
				committed = append(committed, q.Get("digest"))
			}
			slices.Sort(committed)
			want := []string{res.Layer.String(), m.Config.Digest.String()}
			slices.Sort(want)
			if !slices.Equal(committed, want) {
				t.Errorf("uploaded blobs %v, want the layer and the config %v", committed, want)
			}
			mounted := rec.calls(func(c call) bool {
				return c.Method == "POST" && c.Status == 201 && strings.Contains(c.Query, "from=test%2Fbase") && strings.Contains(c.Query, "mount=")
			})
			wantMounts := 0
			if c.repo != "test/base" {
				wantMounts = len(baseLayers)
			}
			if len(mounted) != wantMounts {
				t.Errorf("%d layers mounted, want %d: %+v", len(mounted), wantMounts, rec.calls(func(call) bool { return true }))
			}
			// Everything the manifest names can be read from the target's
			// repository.
			if err := validate.Image(img); err != nil {
				t.Errorf("the pushed image is incomplete: %v", err)
			}
		})
	}
}

// TestOtherRegistry: to another registry, each base layer is copied once,
// streamed: the bytes pass through without being held; a second build
// finds them there and copies nothing.
func TestOtherRegistry(t *testing.T) {
	src := testregistry.Start(t, regPass)
	dst := testregistry.Start(t, "other-Passw0rd")
	baseImg, err := SyntheticBase(96, 7) // layers of 64 and 32 MiB
	if err != nil {
		t.Fatal(err)
	}
	base := src.Push(t, "test/base:latest", baseImg)
	baseLayers, baseBytes := layerDigests(t, baseImg)
	sizes := map[string]int64{}
	m, _ := baseImg.Manifest()
	for _, l := range m.Layers {
		sizes[l.Digest.String()] = l.Size
	}

	rec := &recorder{}
	req := request(base, dst.Host+"/test/copy:one", testLayer(t, "one"), src, dst)
	// Each keychain knows its own registry only: the base's layers are
	// read with the base's credentials, written with the target's.
	req.BaseKeychain, req.PushKeychain = keychainOf(src), keychainOf(dst)
	req.Transport = rec
	var res *Result
	alloc := allocated(func() { res, err = Build(context.Background(), req) })
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	gets := rec.calls(blobCalls("GET", src.Host, baseLayers))
	if len(gets) != len(baseLayers) {
		t.Errorf("%d reads of base layers, want one per layer (%d): %+v", len(gets), len(baseLayers), gets)
	}
	var read int64
	for _, g := range gets {
		read += g.BodyBytes
		if d := g.Path[strings.LastIndex(g.Path, "/")+1:]; g.BodyBytes != sizes[d] {
			t.Errorf("read %d bytes of %s, want its size %d", g.BodyBytes, d, sizes[d])
		}
	}
	t.Logf("copied %d MiB of base layers in %v, allocating %.1f MiB", read>>20, res.PushTime, float64(alloc)/(1<<20))
	// A layer held in memory would allocate at least its size.
	const bound = 8 << 20
	if alloc > bound {
		t.Errorf("Build allocated %d MiB copying %d MiB, want under %d MiB: a layer went through memory", alloc>>20, baseBytes>>20, bound>>20)
	}
	if err := validate.Image(pulled(t, dst, res.Image)); err != nil {
		t.Errorf("the copy is incomplete: %v", err)
	}

	rec.reset()
	req.Target, req.Layer = dst.Host+"/test/copy:two", testLayer(t, "two")
	if _, err := Build(context.Background(), req); err != nil {
		t.Fatalf("second Build: %v", err)
	}
	if gets := rec.calls(blobCalls("GET", src.Host, baseLayers)); len(gets) != 0 {
		t.Errorf("the second build read base layers again: %+v", gets)
	}
	found := rec.calls(func(c call) bool { return blobCalls("HEAD", dst.Host, baseLayers)(c) && c.Status == 200 })
	if len(found) != len(baseLayers) {
		t.Errorf("%d base layers found present by HEAD, want %d: %+v", len(found), len(baseLayers), rec.calls(func(call) bool { return true }))
	}
}

// TestMemoryOnLargeBase: a build on a large base allocates far less than
// one of its layers.
func TestMemoryOnLargeBase(t *testing.T) {
	reg := testregistry.Start(t, regPass)
	const baseMiB = 256
	baseImg, err := SyntheticBase(baseMiB, 1)
	if err != nil {
		t.Fatal(err)
	}
	base := reg.Push(t, "test/big:latest", baseImg)
	// The bound is under one layer: buffering any layer fails the test.
	const bound = 8 << 20
	if bound >= SyntheticLayerMiB<<20 {
		t.Fatalf("bound %d MiB is not under a layer's %d MiB", bound>>20, SyntheticLayerMiB)
	}
	// A layer without its parent directories has Build read the whole
	// base (none of the parents is there), streamed.
	noParents := tarOf(t, []tar.Header{{Typeflag: tar.TypeReg, Name: "etc/strata/deep/a.conf", Mode: 0o644}})
	for _, c := range []struct {
		name, target string
		layer        []byte
	}{
		{"same repository", reg.Host + "/test/big:config", testLayer(t, "same")},
		{"other repository", reg.Host + "/test/big-configs:config", testLayer(t, "other")},
		{"base read for parents", reg.Host + "/test/big:parents", noParents},
	} {
		t.Run(c.name, func(t *testing.T) {
			var res *Result
			alloc := allocated(func() {
				res, err = Build(context.Background(), request(base, c.target, c.layer, reg))
			})
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			t.Logf("build on a %d MiB base: %v (layer %v, push %v), allocated %.2f MiB", baseMiB, res.LayerTime+res.PushTime,
				res.LayerTime, res.PushTime, float64(alloc)/(1<<20))
			if alloc > bound {
				t.Errorf("Build allocated %.1f MiB on a %d MiB base, want under %d MiB", float64(alloc)/(1<<20), baseMiB, bound>>20)
			}
		})
	}
}

// TestSyntheticBase: the same size and seed give the same image, another
// seed another; layers are split as documented and read back as written.
func TestSyntheticBase(t *testing.T) {
	digest := func(mib int, seed uint64) (v1.Hash, v1.Image) {
		t.Helper()
		img, err := SyntheticBase(mib, seed)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d, img
	}
	a, img := digest(SyntheticLayerMiB+3, 1)
	if b, _ := digest(SyntheticLayerMiB+3, 1); a != b {
		t.Errorf("same size and seed: %s and %s", a, b)
	}
	if b, _ := digest(SyntheticLayerMiB+3, 2); a == b {
		t.Errorf("another seed gave the same image %s", a)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 2 || m.Layers[0].Size < SyntheticLayerMiB<<20 || m.Layers[1].Size < 3<<20 || m.Layers[1].Size > 4<<20 {
		t.Errorf("layers %+v, want one of %d MiB and one of 3 MiB", m.Layers, SyntheticLayerMiB)
	}
	// validate reads every layer compressed and uncompressed and checks
	// the digests, sizes and diff_ids the manifest and config claim.
	if err := validate.Image(img); err != nil {
		t.Errorf("synthetic image: %v", err)
	}
	if _, err := SyntheticBase(0, 1); err == nil {
		t.Error("a 0 MiB base was accepted")
	}
}
