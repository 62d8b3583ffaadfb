package diskartifact

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/strata-dev/strata/internal/referrers"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/test/testregistry"
)

const password = "bootdisk-Passw0rd"

type world struct {
	reg   *testregistry.Registry
	c     referrers.Client
	kc    authn.Keychain
	image string
}

func newWorld(t *testing.T, start func(testing.TB, string) *testregistry.Registry) *world {
	t.Helper()
	reg := start(t, password)
	image := reg.Push(t, "strata/pool:build-1", testregistry.Busybox(t))
	auth := base64.StdEncoding.EncodeToString([]byte(reg.User + ":" + password))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
	path := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := registry.KeychainFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return &world{reg: reg, c: referrers.Client{Registry: registry.Client{Insecure: []string{reg.Host}}}, kc: kc, image: image}
}

// disk writes a sparse 8 MiB "disk": random data at its start, a hole,
// more data in its middle, a hole to its end.
func disk(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	content := make([]byte, 8<<20)
	if _, err := rand.Read(content[:300<<10]); err != nil {
		t.Fatal(err)
	}
	if _, err := rand.Read(content[4<<20 : 4<<20+100<<10]); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, content
}

func TestPublishFindDownload(t *testing.T) {
	for _, r := range []struct {
		name  string
		start func(testing.TB, string) *testregistry.Registry
	}{{"distribution", testregistry.Start}, {"referrers-api", testregistry.StartReferrers}} {
		t.Run(r.name, func(t *testing.T) {
			w := newWorld(t, r.start)
			ctx := context.Background()
			dir := t.TempDir()
			path, content := disk(t, dir)

			pub, err := Publish(ctx, w.c, w.image, w.kc, path)
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if pub.Size != int64(len(content)) || pub.Image != w.image || !strings.HasPrefix(pub.Artifact, strings.Split(w.image, "@")[0]+"@sha256:") {
				t.Errorf("Publish = %+v", pub)
			}
			// Compressed: the holes cost next to nothing.
			if pub.CompressedSize <= 0 || pub.CompressedSize > 600<<10 {
				t.Errorf("compressed size %d, want about the 400 KiB of random data", pub.CompressedSize)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".bootdisk-*")); len(left) > 0 {
				t.Errorf("Publish left %v behind", left)
			}

			// Beside the image's other referrers, of our own type.
			list, err := w.c.List(ctx, w.image, w.kc)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0].ArtifactType != ArtifactType {
				t.Fatalf("referrers of the image = %+v, want the boot disk", list)
			}
			found, ok, err := Find(ctx, w.c, w.image, w.kc)
			if err != nil || !ok || found != pub {
				t.Fatalf("Find = %+v, %v, %v; want %+v", found, ok, err, pub)
			}

			// Publishing the same disk again changes nothing.
			again, err := Publish(ctx, w.c, w.image, w.kc, path)
			if err != nil || again != pub {
				t.Errorf("Publish again = %+v, %v; want %+v", again, err, pub)
			}

			out := filepath.Join(t.TempDir(), "downloaded.raw")
			var read int64
			got, err := Download(ctx, w.c.Registry, pub.Artifact, w.kc, out, func(n int64) { read = n })
			if err != nil {
				t.Fatalf("Download: %v", err)
			}
			if got != pub {
				t.Errorf("Download = %+v, want %+v", got, pub)
			}
			if read != pub.CompressedSize {
				t.Errorf("progress said %d bytes, want %d", read, pub.CompressedSize)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, content) {
				t.Fatal("the downloaded disk differs from the published one")
			}
			// Written sparse: the holes take no blocks.
			var st syscall.Stat_t
			if err := syscall.Stat(out, &st); err != nil {
				t.Fatal(err)
			}
			if used := st.Blocks * 512; used > 2<<20 {
				t.Errorf("the downloaded disk uses %d bytes on disk, want it sparse (about 400 KiB)", used)
			}
		})
	}
}

// TestDownloadRefusesWhatDoesNotVerify: a manifest whose annotations do
// not describe its layer (a wrong raw digest, a wrong size), and an
// artifact that is no boot disk, are refused, and nothing is left at the
// output path.
func TestDownloadRefusesWhatDoesNotVerify(t *testing.T) {
	w := newWorld(t, testregistry.Start)
	ctx := context.Background()
	path, _ := disk(t, t.TempDir())
	pub, err := Publish(ctx, w.c, w.image, w.kc, path)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewDigest(pub.Artifact, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref, remote.WithAuthFromKeychain(w.kc))
	if err != nil {
		t.Fatal(err)
	}
	// pushVariant pushes the artifact's manifest changed by edit and
	// returns it by digest.
	pushVariant := func(edit func(*v1.Manifest)) string {
		m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
		if err != nil {
			t.Fatal(err)
		}
		edit(m)
		raw, _ := json.Marshal(m)
		d, _, _ := v1.SHA256(bytes.NewReader(raw))
		target := ref.Context().Digest(d.String())
		if err := remote.Put(target, rawManifest(raw), remote.WithAuthFromKeychain(w.kc)); err != nil {
			t.Fatal(err)
		}
		return target.String()
	}
	for _, c := range []struct {
		name, artifact, want string
	}{
		{"raw digest", pushVariant(func(m *v1.Manifest) {
			m.Annotations[AnnotationRawDigest] = "sha256:" + strings.Repeat("0", 64)
		}), "has digest"},
		{"size", pushVariant(func(m *v1.Manifest) { m.Annotations[AnnotationSize] = "4096" }), "annotation " + AnnotationSize + " says 4096"},
		{"not a disk", pushVariant(func(m *v1.Manifest) { m.ArtifactType = "application/spdx+json" }), "not a boot disk"},
		{"by tag", strings.Split(w.image, "@")[0] + ":build-1", "not by digest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "disk.raw")
			_, err := Download(ctx, w.c.Registry, c.artifact, w.kc, out, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Download = %v, want an error saying %q", err, c.want)
			}
			if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
				t.Errorf("Download left %v behind", entries)
			}
		})
	}
}

type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
