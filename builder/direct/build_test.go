package direct

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/test/testregistry"
)

// pulled is ref as the registry has it.
func pulled(t testing.TB, reg *testregistry.Registry, ref string) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, remote.WithAuth(reg.Auth()))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return img
}

// labelled is busybox with a label that a request overrides and one it
// keeps.
func labelled(t testing.TB, img v1.Image) v1.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf.Config.Labels = map[string]string{"base.label": "kept", "strata.dev/config": "overridden"}
	cf.History = []v1.History{{Created: v1.Time{Time: time.Unix(1, 0).UTC()}, CreatedBy: "busybox rootfs"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// asOCI is img with OCI media types throughout.
func asOCI(t testing.TB, img v1.Image) v1.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, l := range layers {
		if out, err = mutate.Append(out, mutate.Addendum{Layer: l, MediaType: types.OCILayer}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err = mutate.ConfigFile(out, cf); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuild checks the image Build pushes, on a Docker and on an OCI base:
// the base's layers and one more holding the given tar unchanged, config
// and history extended, labels and annotations set, media types of the
// base's kind.
func TestBuild(t *testing.T) {
	reg := testregistry.Start(t, regPass)
	busybox := labelled(t, testregistry.Busybox(t))
	for _, c := range []struct {
		name                  string
		base                  v1.Image
		manifestType, layerMT types.MediaType
	}{
		{"Docker", busybox, types.DockerManifestSchema2, types.DockerLayer},
		{"OCI", asOCI(t, busybox), types.OCIManifestSchema1, types.OCILayer},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := reg.Push(t, "test/base-"+strings.ToLower(c.name)+":latest", c.base)
			layer := testLayer(t, c.name)
			req := request(base, reg.Host+"/test/out:"+c.name, layer, reg)
			req.Labels["strata.dev/pool"] = "worker"
			req.Annotations = map[string]string{"org.opencontainers.image.description": "strata config"}
			res, err := Build(context.Background(), req)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if want := reg.Host + "/test/out@" + res.Digest.String(); res.Image != want {
				t.Errorf("Image = %s, want %s", res.Image, want)
			}
			img := pulled(t, reg, req.Target)
			if d, _ := img.Digest(); d != res.Digest {
				t.Errorf("the tag names %s, Build reported %s", d, res.Digest)
			}
			if err := validate.Image(img); err != nil {
				t.Errorf("the pushed image is not valid: %v", err)
			}

			bm, _ := c.base.Manifest()
			bc, _ := c.base.ConfigFile()
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if m.MediaType != c.manifestType || m.Config.MediaType != bm.Config.MediaType {
				t.Errorf("manifest %s with config %s, want %s with %s", m.MediaType, m.Config.MediaType, c.manifestType, bm.Config.MediaType)
			}
			if len(m.Layers) != len(bm.Layers)+1 {
				t.Fatalf("%d layers, want the base's %d and one", len(m.Layers), len(bm.Layers))
			}
			for i, l := range bm.Layers {
				if m.Layers[i].Digest != l.Digest || m.Layers[i].MediaType != l.MediaType {
					t.Errorf("layer %d is %s %s, want the base's %s %s", i, m.Layers[i].MediaType, m.Layers[i].Digest, l.MediaType, l.Digest)
				}
			}
			top := m.Layers[len(m.Layers)-1]
			if top.MediaType != c.layerMT || top.Digest != res.Layer {
				t.Errorf("new layer is %s %s, want %s %s", top.MediaType, top.Digest, c.layerMT, res.Layer)
			}
			diffID, _, _ := v1.SHA256(bytes.NewReader(layer))
			wantDiffs := append(append([]v1.Hash{}, bc.RootFS.DiffIDs...), diffID)
			if fmt.Sprint(cf.RootFS.DiffIDs) != fmt.Sprint(wantDiffs) {
				t.Errorf("diff_ids %v, want %v", cf.RootFS.DiffIDs, wantDiffs)
			}
			wantHist := append(append([]v1.History{}, bc.History...), v1.History{Created: epoch, CreatedBy: req.CreatedBy})
			if fmt.Sprint(cf.History) != fmt.Sprint(wantHist) {
				t.Errorf("history %+v, want %+v", cf.History, wantHist)
			}
			if !cf.Created.Equal(time.Unix(0, 0)) {
				t.Errorf("created %v, want the Unix epoch", cf.Created)
			}
			wantLabels := map[string]string{"base.label": "kept", "strata.dev/config": "rendered-worker-1", "strata.dev/pool": "worker"}
			if fmt.Sprint(cf.Config.Labels) != fmt.Sprint(wantLabels) {
				t.Errorf("labels %v, want %v", cf.Config.Labels, wantLabels)
			}
			if fmt.Sprint(cf.Config.Cmd, cf.Config.Env, cf.OS, cf.Architecture) != fmt.Sprint(bc.Config.Cmd, bc.Config.Env, bc.OS, bc.Architecture) {
				t.Errorf("config %+v lost the base's %+v", cf.Config, bc.Config)
			}
			if m.Annotations["org.opencontainers.image.description"] != "strata config" {
				t.Errorf("annotations %v", m.Annotations)
			}

			// The layer's content is the given tar, byte for byte.
			l, err := img.LayerByDigest(res.Layer)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			_ = rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, layer) {
				t.Errorf("the pushed layer's tar differs from the given one (%d bytes, want %d)", len(got), len(layer))
			}
			if res.LayerTime <= 0 || res.PushTime <= 0 {
				t.Errorf("LayerTime %v, PushTime %v", res.LayerTime, res.PushTime)
			}
		})
	}
}

// TestSameInputsSameDigest: a build's digest depends on its inputs only,
// not on when it ran, map order or the tag it went to.
func TestSameInputsSameDigest(t *testing.T) {
	reg := testregistry.Start(t, regPass)
	base := reg.Push(t, "test/base:latest", testregistry.Busybox(t))
	build := func(tag string, layer []byte, labels map[string]string) v1.Hash {
		t.Helper()
		req := request(base, reg.Host+"/test/same:"+tag, layer, reg)
		req.Labels = labels
		req.Annotations = map[string]string{"a": "1", "b": "2", "c": "3"}
		res, err := Build(context.Background(), req)
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		return res.Digest
	}
	// Enough labels that two iterations of the map differ in order.
	labels := map[string]string{}
	for i := range 32 {
		labels[fmt.Sprintf("strata.dev/l%02d", i)] = fmt.Sprint(i)
	}
	layer := testLayer(t, "one")
	first := build("a", layer, labels)
	if second := build("b", bytes.Clone(layer), labels); second != first {
		t.Errorf("the same inputs gave %s and %s", first, second)
	}
	if other := build("c", testLayer(t, "two"), labels); other == first {
		t.Errorf("a different layer gave the same digest %s", other)
	}
	labels["strata.dev/l00"] = "changed"
	if other := build("d", layer, labels); other == first {
		t.Errorf("different labels gave the same digest %s", other)
	}
}

// TestIndexBase: an index base gives the image of the requested platform.
func TestIndexBase(t *testing.T) {
	reg := testregistry.Start(t, regPass)
	amd64 := testregistry.Busybox(t)
	cf, err := amd64.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf.Architecture = "arm64"
	arm64, err := mutate.ConfigFile(amd64, cf)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: amd64, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm64, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	ref, err := name.NewTag(reg.Host+"/test/multi:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx, remote.WithAuth(reg.Auth())); err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	base := ref.Context().Name() + "@" + d.String()

	for _, arch := range []string{"amd64", "arm64"} {
		req := request(base, reg.Host+"/test/multi-out:"+arch, testLayer(t, arch), reg)
		req.Platform.Architecture = arch
		res, err := Build(context.Background(), req)
		if err != nil {
			t.Fatalf("Build for %s: %v", arch, err)
		}
		got, err := pulled(t, reg, res.Image).ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got.Architecture != arch {
			t.Errorf("built for %s on an index: the image is %s", arch, got.Architecture)
		}
	}
	req := request(base, reg.Host+"/test/multi-out:s390x", testLayer(t, "s390x"), reg)
	req.Platform.Architecture = "s390x"
	_, err = Build(context.Background(), req)
	wantStage(t, err, StageBase, "s390x")
}

// TestErrors: each failure names its stage, refused credentials are
// recognisable, and no message shows a password.
func TestErrors(t *testing.T) {
	reg := testregistry.Start(t, regPass)
	base := reg.Push(t, "test/base:latest", testregistry.Busybox(t))
	wrong := hostKeychain{reg.Host: &authn.Basic{Username: "strata", Password: "wrong-Passw0rd"}}
	layer := testLayer(t, "errors")
	target := reg.Host + "/test/err:latest"
	cases := []struct {
		name   string
		mod    func(r *Request)
		stage  Stage
		auth   bool
		substr string
	}{
		{"wrong base password", func(r *Request) { r.BaseKeychain = wrong }, StageBase, true, "refused the credentials"},
		{"anonymous base", func(r *Request) { r.BaseKeychain = nil }, StageBase, true, "refused the credentials"},
		{"wrong push password", func(r *Request) { r.PushKeychain = wrong }, StagePush, true, "refused the credentials"},
		{"missing base", func(r *Request) { r.Base = reg.Host + "/test/nonexistent@sha256:" + strings.Repeat("ab", 32) }, StageBase, false, "test/nonexistent"},
		{"base by tag", func(r *Request) { r.Base = reg.Host + "/test/base:latest" }, StageBase, false, "not by digest"},
		{"base of another architecture", func(r *Request) { r.Platform.Architecture = "arm64" }, StageBase, false, "linux/amd64, not linux/arm64"},
		{"layer not a tar", func(r *Request) {
			r.Layer = []byte("not a tar, not at all, but long enough to be read as a header block" + strings.Repeat("x", 600))
		}, StageLayer, false, "not a valid uncompressed tar"},
		{"empty layer", func(r *Request) { r.Layer = nil }, StageLayer, false, "zero bytes"},
		{"truncated layer", func(r *Request) { r.Layer = layer[:700] }, StageLayer, false, "unexpected EOF"},
		{"target by digest", func(r *Request) { r.Target = reg.Host + "/test/err@sha256:" + strings.Repeat("ab", 32) }, StagePush, false, "not a tag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := request(base, target, layer, reg)
			c.mod(&req)
			res, err := Build(context.Background(), req)
			if res != nil {
				t.Errorf("result %+v with error %v", res, err)
			}
			wantStage(t, err, c.stage, c.substr)
			t.Logf("error: %v", err)
			if registry.IsUnauthorized(err) != c.auth {
				t.Errorf("IsUnauthorized = %v, want %v: %v", !c.auth, c.auth, err)
			}
			if strings.Contains(err.Error(), "wrong-Passw0rd") || strings.Contains(err.Error(), regPass) {
				t.Errorf("the error shows a password: %v", err)
			}
		})
	}
}

// TestCancelled: Build stops with its context.
func TestCancelled(t *testing.T) {
	reg := testregistry.Start(t, regPass)
	base := reg.Push(t, "test/base:latest", testregistry.Busybox(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Build(ctx, request(base, reg.Host+"/test/cancelled:latest", testLayer(t, "x"), reg))
	wantStage(t, err, StageBase, "context canceled")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(%v, context.Canceled) = false", err)
	}
}

func wantStage(t *testing.T, err error, stage Stage, substr string) {
	t.Helper()
	var se *StageError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T), want a *StageError", err, err)
	}
	if se.Stage != stage || !strings.Contains(err.Error(), substr) {
		t.Errorf("error %q, want stage %s and %q", err, stage, substr)
	}
}
