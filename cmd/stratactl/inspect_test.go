package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/direct"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/internal/referrers"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/provenance"
	"github.com/strata-dev/strata/sbom"
	"github.com/strata-dev/strata/test/testregistry"
)

const inspectPassword = "inspect-Passw0rd"

// inspectIgnition is the configuration of the inspected image: a file, a
// directory and a link.
const inspectIgnition = `{"ignition":{"version":"3.5.0"},"storage":{
  "files":[{"path":"/etc/strata/app.conf","mode":416,"user":{"id":1000},"contents":{"source":"data:,key%3Dvalue%0A"}}],
  "directories":[{"path":"/etc/strata","mode":493}],
  "links":[{"path":"/etc/strata/current","target":"app.conf"}]},
 "systemd":{"units":[{"name":"strata-app.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"},{"name":"debug-shell.service","mask":true}]}}`

func runInspect(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newInspectCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage = true
	err := cmd.Execute()
	return out.String(), err
}

// builtImage is an image as the build controller makes it: the rendered
// configuration appended to a base, with the render's labels and
// annotations, its SBOM and provenance attached.
type builtImage struct {
	image, tag string
	res        *containerfile.Result
	base       string
	refs       []referrers.Referrer
}

func buildForInspect(t *testing.T, reg *testregistry.Registry) builtImage {
	t.Helper()
	ctx := context.Background()
	base := reg.Push(t, "os/base:1", testregistry.Busybox(t))
	spec := &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(inspectIgnition)}, KernelArguments: []string{"nosmt", "console=ttyS0,115200"}}
	res, err := containerfile.Render(containerfile.Input{ConfigName: "rendered-worker-1", Pool: "worker", Spec: spec, BaseImage: base, Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := registry.Keychain(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: "push"},
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: reg.DockerConfigJSON(inspectPassword)},
	})
	if err != nil {
		t.Fatal(err)
	}
	tag := reg.Host + "/strata/worker:worker-1"
	built, err := direct.Build(ctx, direct.Request{
		Base: base, BaseKeychain: kc, Layer: res.Stages.Layer, Labels: res.Labels, Annotations: res.Annotations,
		Target: tag, PushKeychain: kc, Insecure: []string{reg.Host},
	})
	if err != nil {
		t.Fatal(err)
	}
	var layer []byte
	for _, f := range res.Context {
		if f.Name == containerfile.RootfsName {
			layer = f.Data
		}
	}
	repo, digest, _ := strings.Cut(built.Image, "@")
	doc, err := sbom.Generate(sbom.Input{Image: repo, ImageDigest: digest, BaseImage: base, Pool: "worker",
		RenderedConfig: "rendered-worker-1", InputHash: res.InputHash, Layer: layer, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	statement, err := provenance.Generate(provenance.Input{Image: repo, ImageDigest: digest, BaseImage: base, Pool: "worker",
		RenderedConfig: "rendered-worker-1", MachineOSConfig: "worker", MachineOSConfigGeneration: 1, Strategy: "ConfigLayer",
		Containerfile: res.Containerfile, InputHash: res.InputHash, BuilderID: "test", BuilderVersion: "v0"})
	if err != nil {
		t.Fatal(err)
	}
	c := referrers.Client{Registry: registry.Client{Insecure: []string{reg.Host}}}
	var refs []referrers.Referrer
	for _, a := range []referrers.Artifact{{Type: sbom.ArtifactType, Data: doc}, {Type: provenance.ArtifactType, Data: statement}} {
		r, err := c.Attach(ctx, built.Image, kc, a)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	return builtImage{image: built.Image, tag: tag, res: res, base: base, refs: refs}
}

// authFile writes registry credentials as a containers auth.json.
func authFile(t *testing.T, reg *testregistry.Registry, password string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(p, reg.DockerConfigJSON(password), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestInspect: inspect reads, through the registry, what Strata put into
// an image, from the manifest, the config, the referrers and the SBOM,
// by digest or by tag, as text or JSON, on both kinds of registry.
func TestInspect(t *testing.T) {
	for _, start := range []struct {
		name string
		fn   func(testing.TB, string) *testregistry.Registry
	}{{"distribution", testregistry.Start}, {"referrers-api", testregistry.StartReferrers}} {
		t.Run(start.name, func(t *testing.T) {
			reg := start.fn(t, inspectPassword)
			b := buildForInspect(t, reg)
			auth := authFile(t, reg, inspectPassword)
			_, baseDigest, _ := strings.Cut(b.base, "@")

			out, err := runInspect(t, b.tag, "--registry-config", auth, "-o", "json")
			if err != nil {
				t.Fatalf("inspect: %v\n%s", err, out)
			}
			var got inspection
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("JSON output: %v\n%s", err, out)
			}
			if got.Image != b.image || got.Base.Name != b.base || got.Base.Digest != baseDigest || got.Pool != "worker" ||
				got.RenderedConfig != "rendered-worker-1" || got.InputHash != b.res.InputHash {
				t.Errorf("inspection %+v, want image %s on %s of worker, rendered-worker-1, %s", got, b.image, b.base, b.res.InputHash)
			}
			if got.Annotations[containerfile.AnnotationBaseName] != b.base || got.Labels[containerfile.LabelPool] != "worker" {
				t.Errorf("annotations %v, labels %v", got.Annotations, got.Labels)
			}
			if len(got.Referrers) != 2 {
				t.Fatalf("referrers %+v, want the SBOM and the provenance", got.Referrers)
			}
			for _, want := range b.refs {
				found := false
				for _, r := range got.Referrers {
					found = found || (r.ArtifactType == want.ArtifactType && r.Digest == want.Digest)
				}
				if !found {
					t.Errorf("referrer %s %s not reported: %+v", want.ArtifactType, want.Digest, got.Referrers)
				}
			}
			if !got.SBOM {
				t.Fatal("no SBOM found")
			}
			files := map[string]sbom.File{}
			for _, f := range got.Files {
				files[f.Path] = f
			}
			if f := files["/etc/strata/app.conf"]; f.Type != "file" || f.SHA256 != sha256Hex("key=value\n") || f.Mode != "0640" || f.UID != 1000 || f.GID != 0 {
				t.Errorf("/etc/strata/app.conf = %+v, want a file 0640 1000:0 with its digest (files %+v)", f, got.Files)
			}
			if f := files["/etc/strata"]; f.Type != "directory" || f.Mode != "0755" {
				t.Errorf("/etc/strata = %+v, want a directory 0755", f)
			}
			if f := files["/etc/strata/current"]; f.Type != "symlink" || f.Target != "app.conf" {
				t.Errorf("/etc/strata/current = %+v, want a link to app.conf", f)
			}
			if strings.Join(got.KernelArguments, " ") != "nosmt console=ttyS0,115200" {
				t.Errorf("kernel arguments %q", got.KernelArguments)
			}
			if len(got.Units) != 2 || got.Units[0].Name != "debug-shell.service" || !got.Units[0].Masked ||
				got.Units[1].Name != "strata-app.service" || !got.Units[1].Enabled || !got.Units[1].Contents {
				t.Errorf("units %+v", got.Units)
			}

			defer func() { t.Log(out) }()
			// Text, by digest.
			text, err := runInspect(t, b.image, "--registry-config", auth)
			t.Log(text)
			if err != nil {
				t.Fatalf("inspect: %v\n%s", err, text)
			}
			for _, want := range []string{
				"Image:            " + b.image + "\n",
				"Base:             " + b.base + "\n",
				"Base digest:      " + baseDigest + "\n",
				"Pool:             worker\n",
				"Rendered config:  rendered-worker-1\n",
				"Input hash:       " + b.res.InputHash + "\n",
				"file",
				"0640",
				"1000:0",
				sha256Hex("key=value\n"),
				"/etc/strata/app.conf\n",
				"/etc/strata/current -> app.conf\n",
				"Kernel arguments (2, from the SBOM):\n  nosmt\n  console=ttyS0,115200\n",
				"  debug-shell.service: masked\n",
				"  strata-app.service: enabled; unit file\n",
				"Referrers (2):",
				sbom.ArtifactType, provenance.ArtifactType, b.refs[0].Digest.String(), b.refs[1].Digest.String(),
			} {
				if !strings.Contains(text, want) {
					t.Errorf("text output lacks %q:\n%s", want, text)
				}
			}
		})
	}
}

// TestInspectErrors: refused credentials, a missing image and a bad flag
// say so.
func TestInspectErrors(t *testing.T) {
	reg := testregistry.StartReferrers(t, inspectPassword)
	b := buildForInspect(t, reg)
	if _, err := runInspect(t, b.image, "--registry-config", authFile(t, reg, "wrong")); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Errorf("wrong password: %v", err)
	}
	missing := strings.Split(b.image, "@")[0] + "@sha256:" + strings.Repeat("0", 64)
	if _, err := runInspect(t, missing, "--registry-config", authFile(t, reg, inspectPassword)); err == nil || !strings.Contains(err.Error(), "no such image") {
		t.Errorf("missing image: %v", err)
	}
	if _, err := runInspect(t, b.image, "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "want text or json") {
		t.Errorf("-o yaml: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runInspect(t, b.image, "--registry-config", bad); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("bad credentials file: %v", err)
	}
}

// TestInspectForeignSBOM: an SBOM Strata did not write is reported as
// unreadable, with everything else.
func TestInspectForeignSBOM(t *testing.T) {
	reg := testregistry.StartReferrers(t, "")
	image := reg.Push(t, "plain/busybox:1", testregistry.Busybox(t))
	c := referrers.Client{Registry: registry.Client{Insecure: []string{reg.Host}}}
	r, err := c.Attach(context.Background(), image, nil, referrers.Artifact{Type: sbom.ArtifactType, Data: []byte(`{"spdxVersion":"SPDX-2.2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := runInspect(t, image)
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	for _, want := range []string{"are not known: SBOM " + r.Digest.String() + ": sbom: spdxVersion", "Referrers (1):", r.Digest.String() + "  SBOM"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestInspectImageWithoutReferrers: an image without an SBOM is shown
// with what its manifest and config say.
func TestInspectImageWithoutReferrers(t *testing.T) {
	reg := testregistry.Start(t, "")
	image := reg.Push(t, "plain/busybox:1", testregistry.Busybox(t))
	out, err := runInspect(t, image)
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	for _, want := range []string{"Image:            " + image, "Pool:             -", "No SBOM referrer", "Referrers (0):"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
