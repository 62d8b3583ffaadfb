package referrers

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/test/testregistry"
)

const (
	password = "referrers-Passw0rd"
	sbomType = "application/spdx+json"
	provType = "application/vnd.in-toto+json"
)

// registries are the two kinds Strata meets: distribution, which lists
// referrers through the referrers tag schema (the test cluster's), and a
// registry with the referrers API.
var registries = []struct {
	name  string
	start func(testing.TB, string) *testregistry.Registry
}{
	{"distribution", testregistry.Start},
	{"referrers-api", testregistry.StartReferrers},
}

// world is a registry with an image and a client with its credentials.
type world struct {
	reg   *testregistry.Registry
	c     Client
	kc    authn.Keychain
	image string
}

func newWorld(t *testing.T, start func(testing.TB, string) *testregistry.Registry) *world {
	t.Helper()
	reg := start(t, password)
	image := reg.Push(t, "strata/pool:build-1", testregistry.Busybox(t))
	return &world{reg: reg, c: Client{Registry: registry.Client{Insecure: []string{reg.Host}}}, kc: keychain(t, reg, password), image: image}
}

func keychain(t *testing.T, reg *testregistry.Registry, pw string) authn.Keychain {
	t.Helper()
	kc, err := registry.Keychain(secret(reg.DockerConfigJSON(pw)))
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

func (w *world) attach(t *testing.T, a Artifact) Referrer {
	t.Helper()
	r, err := w.c.Attach(context.Background(), w.image, w.kc, a)
	if err != nil {
		t.Fatalf("Attach %s: %v", a.Type, err)
	}
	return r
}

func (w *world) list(t *testing.T) []Referrer {
	t.Helper()
	list, err := w.c.List(context.Background(), w.image, w.kc)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return list
}

// exists says whether the registry has ref's manifest.
func (w *world) exists(t *testing.T, ref string) bool {
	t.Helper()
	ok, err := registry.Client{Insecure: []string{w.reg.Host}}.Exists(context.Background(), ref, w.kc)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// fallbackTag is the image's tag of the referrers tag schema.
func (w *world) fallbackTag() string {
	repo, digest, _ := strings.Cut(w.image, "@")
	return repo + ":" + strings.Replace(digest, ":", "-", 1)
}

func TestAttachListRead(t *testing.T) {
	for _, r := range registries {
		t.Run(r.name, func(t *testing.T) {
			w := newWorld(t, r.start)
			sbom := Artifact{Type: sbomType, Data: []byte(`{"spdxVersion":"SPDX-2.3"}`), Annotations: map[string]string{"b": "2", "a": "1"}}
			prov := Artifact{Type: provType, Data: []byte(`{"_type":"https://in-toto.io/Statement/v1"}`)}
			// Attached out of List's order.
			got := make([]Referrer, 2)
			got[1] = w.attach(t, prov)
			got[0] = w.attach(t, sbom)

			list := w.list(t)
			if len(list) != 2 {
				t.Fatalf("List = %+v, want the two artifacts", list)
			}
			// Sorted by type: spdx before vnd.in-toto.
			for i, want := range got {
				if list[i].ArtifactType != want.ArtifactType || list[i].Digest != want.Digest || list[i].Size != want.Size {
					t.Errorf("List[%d] = %+v, want %+v", i, list[i], want)
				}
			}
			if list[0].Annotations["a"] != "1" || list[0].Annotations["b"] != "2" {
				t.Errorf("SBOM referrer annotations = %v", list[0].Annotations)
			}
			for i, a := range []Artifact{sbom, prov} {
				data, err := w.c.Read(context.Background(), w.image, list[i], w.kc)
				if err != nil {
					t.Fatalf("Read %s: %v", a.Type, err)
				}
				if !bytes.Equal(data, a.Data) {
					t.Errorf("Read %s = %q, want %q", a.Type, data, a.Data)
				}
			}

			// The manifest is what the package comment says it is.
			ref, err := name.ParseReference(strings.Split(w.image, "@")[0]+"@"+got[0].Digest.String(), name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			desc, err := remote.Get(ref, remote.WithAuthFromKeychain(w.kc))
			if err != nil {
				t.Fatal(err)
			}
			m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
			if err != nil {
				t.Fatal(err)
			}
			imageDigest := strings.Split(w.image, "@")[1]
			if m.MediaType != types.OCIManifestSchema1 || m.ArtifactType != sbomType || m.Config.MediaType != types.OCIEmptyJSON ||
				m.Config.Size != 2 || len(m.Layers) != 1 || m.Layers[0].MediaType != sbomType ||
				m.Subject == nil || m.Subject.Digest.String() != imageDigest || m.Subject.MediaType == "" || m.Subject.Size == 0 {
				t.Errorf("referrer manifest:\n%s", desc.Manifest)
			}

			// Attaching again changes nothing.
			again := w.attach(t, sbom)
			if again.Digest != got[0].Digest {
				t.Errorf("attaching the same SBOM again gave %s, first %s", again.Digest, got[0].Digest)
			}
			if n := len(w.list(t)); n != 2 {
				t.Errorf("after attaching again, %d referrers, want 2", n)
			}
		})
	}
}

// TestReferrersAPI: on a registry with the referrers API, the referrers
// are found through it: its endpoint answers with them, and no tag of the
// referrers tag schema exists. On distribution that tag is how they are
// found (the test cluster's registry).
func TestReferrersAPI(t *testing.T) {
	for _, r := range registries {
		t.Run(r.name, func(t *testing.T) {
			w := newWorld(t, r.start)
			sbom := w.attach(t, Artifact{Type: sbomType, Data: []byte(`{}`)})

			repo, digest, _ := strings.Cut(w.image, "@")
			path := strings.TrimPrefix(repo, w.reg.Host+"/")
			req, err := http.NewRequest(http.MethodGet, "http://"+w.reg.Host+"/v2/"+path+"/referrers/"+digest, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.SetBasicAuth(w.reg.User, w.reg.Password)
			req.Header.Set("Accept", string(types.OCIImageIndex))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			var idx v1.IndexManifest
			apiFound := false
			if resp.StatusCode == http.StatusOK {
				if err := json.NewDecoder(resp.Body).Decode(&idx); err != nil {
					t.Fatal(err)
				}
				for _, m := range idx.Manifests {
					apiFound = apiFound || m.Digest == sbom.Digest
				}
			}
			tagged := w.exists(t, w.fallbackTag())
			if r.name == "referrers-api" {
				if !apiFound {
					t.Errorf("the referrers endpoint answered %d without the SBOM: %+v", resp.StatusCode, idx)
				}
				if tagged {
					t.Errorf("%s exists: the referrers were not found through the API", w.fallbackTag())
				}
			} else {
				if resp.StatusCode == http.StatusOK {
					t.Errorf("distribution answered the referrers endpoint; the fallback is no longer tested here")
				}
				if !tagged {
					t.Errorf("%s does not exist: where did the referrer go?", w.fallbackTag())
				}
			}
		})
	}
}

func TestDeleteAll(t *testing.T) {
	for _, r := range registries {
		t.Run(r.name, func(t *testing.T) {
			w := newWorld(t, r.start)
			repo := strings.Split(w.image, "@")[0]
			var refs []string
			for _, a := range []Artifact{{Type: sbomType, Data: []byte(`{"a":1}`)}, {Type: provType, Data: []byte(`{"b":2}`)}} {
				refs = append(refs, repo+"@"+w.attach(t, a).Digest.String())
			}
			n, err := w.c.DeleteAll(context.Background(), w.image, w.kc)
			if err != nil {
				t.Fatalf("DeleteAll: %v", err)
			}
			if n != 2 {
				t.Errorf("DeleteAll deleted %d, want 2", n)
			}
			if list := w.list(t); len(list) != 0 {
				t.Errorf("referrers after DeleteAll: %+v", list)
			}
			for _, ref := range refs {
				if w.exists(t, ref) {
					t.Errorf("%s still exists", ref)
				}
			}
			if w.exists(t, w.fallbackTag()) {
				t.Errorf("%s still exists", w.fallbackTag())
			}
			if !w.exists(t, w.image) {
				t.Errorf("DeleteAll deleted the image itself")
			}
			// Nothing left to delete is no error.
			if n, err := w.c.DeleteAll(context.Background(), w.image, w.kc); err != nil || n != 0 {
				t.Errorf("DeleteAll again = %d, %v", n, err)
			}
		})
	}
}

func TestRefusedCredentials(t *testing.T) {
	for _, r := range registries {
		t.Run(r.name, func(t *testing.T) {
			w := newWorld(t, r.start)
			bad := keychain(t, w.reg, "wrong")
			_, err := w.c.Attach(context.Background(), w.image, bad, Artifact{Type: sbomType, Data: []byte(`{}`)})
			if !registry.IsUnauthorized(err) {
				t.Errorf("Attach with a wrong password: %v, want a refusal", err)
			}
			if _, err := w.c.List(context.Background(), w.image, bad); !registry.IsUnauthorized(err) {
				t.Errorf("List with a wrong password: %v, want a refusal", err)
			}
		})
	}
}

func TestAttachNeedsDigestAndImage(t *testing.T) {
	w := newWorld(t, testregistry.StartReferrers)
	repo := strings.Split(w.image, "@")[0]
	a := Artifact{Type: sbomType, Data: []byte(`{}`)}
	if _, err := w.c.Attach(context.Background(), repo+":build-1", w.kc, a); err == nil || !strings.Contains(err.Error(), "not by digest") {
		t.Errorf("Attach to a tag: %v", err)
	}
	missing := repo + "@sha256:" + strings.Repeat("0", 64)
	if _, err := w.c.Attach(context.Background(), missing, w.kc, a); !registry.IsNotFound(err) {
		t.Errorf("Attach to a missing image: %v, want not found", err)
	}
	if _, err := w.c.Attach(context.Background(), w.image, w.kc, Artifact{Data: []byte(`{}`)}); err == nil {
		t.Errorf("Attach of an artifact without a type succeeded")
	}
}

// TestManifestDeterministic: the same artifact on the same image is the
// same bytes; another image or content is another manifest.
func TestManifestDeterministic(t *testing.T) {
	subject := v1.Descriptor{MediaType: types.OCIManifestSchema1, Size: 500, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}}
	a := Artifact{Type: sbomType, Data: []byte(`{"x":1}`), Annotations: map[string]string{"z": "1", "a": "2", "m": "3"}}
	first, err := Manifest(subject, a)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := Manifest(subject, a)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("two manifests of one input differ:\n%s\n%s", first, again)
		}
	}
	other := subject
	other.Digest.Hex = strings.Repeat("b", 64)
	for _, variant := range []struct {
		s v1.Descriptor
		a Artifact
	}{{other, a}, {subject, Artifact{Type: sbomType, Data: []byte(`{"x":2}`)}}} {
		m, err := Manifest(variant.s, variant.a)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(m, first) {
			t.Errorf("another subject or artifact gave the same manifest")
		}
	}
	want := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","size":2,"digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},"layers":[{"mediaType":"application/spdx+json","size":7,"digest":"sha256:`
	if !strings.HasPrefix(string(first), want) {
		t.Errorf("manifest:\n%s\nwant it to start with\n%s", first, want)
	}
}

func secret(dockerConfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: "push"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig},
	}
}
