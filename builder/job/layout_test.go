package job

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testregistry"
)

// TestPushChecksTheLayout runs the push phase on OCI layouts as the build
// container could leave them: the push container holds the push secret,
// and the build container runs user code, which may have written
// anything there. Only a layout of regular files whose index names one
// image manifest, and whose blobs all match their digests, is pushed;
// anything else fails the Push step naming what is wrong, and nothing
// reaches the registry.
func TestPushChecksTheLayout(t *testing.T) {
	for _, bin := range []string{"bash", "skopeo", "jq", "sha256sum"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: the test needs it (apt-get install -y skopeo jq)", bin)
		}
	}
	reg := testregistry.Start(t, regPass)
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.Append(img, mutate.Addendum{Layer: testregistry.FilesLayer(t, map[string]string{"etc/motd": "hi\n"}), MediaType: types.OCILayer})
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	layer := "blobs/sha256/" + m.Layers[0].Digest.Hex
	manifest := "blobs/sha256/" + want.Hex

	cases := []struct {
		name   string
		tamper func(t *testing.T, dir, secret string)
		fail   string // "" pushes
	}{
		{"a layout as buildah writes it", func(*testing.T, string, string) {}, ""},
		{"a blob changed", func(t *testing.T, dir, _ string) {
			writeFile(t, filepath.Join(dir, layer), []byte("not the layer"))
		}, "has the digest"},
		{"a blob that links to the push secret", func(t *testing.T, dir, secret string) {
			symlink(t, secret, filepath.Join(dir, layer))
		}, "not part of a layout of regular files"},
		{"index.json a link", func(t *testing.T, dir, secret string) {
			symlink(t, secret, filepath.Join(dir, "index.json"))
		}, "not part of a layout of regular files"},
		{"a file besides the layout's", func(t *testing.T, dir, _ string) {
			writeFile(t, filepath.Join(dir, "storage", "overlay.json"), []byte("{}"))
		}, "holds storage"},
		{"a named pipe", func(t *testing.T, dir, _ string) {
			if err := exec.Command("mkfifo", filepath.Join(dir, "blobs", "sha256", strings.Repeat("f", 64))).Run(); err != nil {
				t.Fatal(err)
			}
		}, "not part of a layout of regular files"},
		{"index.json that does not parse", func(t *testing.T, dir, _ string) {
			writeFile(t, filepath.Join(dir, "index.json"), []byte(`{"manifests": [`))
		}, "does not parse"},
		{"two manifests", func(t *testing.T, dir, _ string) {
			editIndex(t, dir, func(ix map[string]any) {
				ms := ix["manifests"].([]any)
				ix["manifests"] = append(ms, ms[0])
			})
		}, "must name one OCI image manifest"},
		{"a missing layer", func(t *testing.T, dir, _ string) {
			if err := os.Remove(filepath.Join(dir, layer)); err != nil {
				t.Fatal(err)
			}
		}, "lacks the blob"},
		{"a manifest of another size", func(t *testing.T, dir, _ string) {
			editIndex(t, dir, func(ix map[string]any) { ix["manifests"].([]any)[0].(map[string]any)["size"] = 1 })
		}, "not of the size"},
		{"no manifest", func(t *testing.T, dir, _ string) {
			if err := os.Remove(filepath.Join(dir, manifest)); err != nil {
				t.Fatal(err)
			}
		}, "lacks its manifest"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			lay := filepath.Join(dir, "layout")
			p, err := layout.Write(lay, empty.Index)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.AppendImage(img); err != nil {
				t.Fatal(err)
			}
			secretDir := filepath.Join(dir, "secrets", "push")
			writeFile(t, filepath.Join(secretDir, AuthFileName), reg.DockerConfigJSON(regPass))
			c.tamper(t, lay, filepath.Join(secretDir, AuthFileName))

			spec := reg.Host + "/test/layout:" + strings.Repeat("x", i+1)
			script := filepath.Join(dir, "build.sh")
			writeFile(t, script, []byte(BuildScript()))
			termLog := filepath.Join(dir, "termination-log")
			cmd := exec.Command("bash", script, ContainerPush)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "STRATA_TERMINATION_LOG=" + termLog,
				"STRATA_SCRATCH=" + filepath.Join(dir, "scratch"), "STRATA_LAYOUT=" + lay, "STRATA_INSECURE_REGISTRIES=" + reg.Host,
				"STRATA_PUSH_SPEC=" + spec, "STRATA_PUSH_AUTHFILE=" + filepath.Join(secretDir, AuthFileName)}
			out, runErr := cmd.CombinedOutput()
			msg, err := os.ReadFile(termLog)
			if err != nil {
				t.Fatalf("no report (%v): %v\n%s", runErr, err, out)
			}
			var tm TerminationMessage
			if err := json.Unmarshal(msg, &tm); err != nil {
				t.Fatalf("report %q: %v", msg, err)
			}
			ref, err := name.ParseReference(spec, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			desc, headErr := remote.Head(ref, remote.WithAuth(reg.Auth()))
			if c.fail == "" {
				if runErr != nil || tm.Digest != want.String() || headErr != nil || desc.Digest != want {
					t.Fatalf("push: %v, report %+v, registry %v %v; want %s pushed\n%s", runErr, tm, desc, headErr, want, out)
				}
				return
			}
			var ee *exec.ExitError
			if !errors.As(runErr, &ee) || tm.Step != v1alpha1.BuildStepPush || !strings.Contains(tm.Message, c.fail) {
				t.Errorf("exit %v, report %+v; want step Push saying %q\n%s", runErr, tm, c.fail, out)
			}
			if headErr == nil {
				t.Errorf("the registry has %s (%s) from a layout the build container changed", spec, desc.Digest)
			}
		})
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func editIndex(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ix map[string]any
	if err := json.Unmarshal(raw, &ix); err != nil {
		t.Fatal(err)
	}
	edit(ix)
	raw, err = json.Marshal(ix)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "index.json"), raw)
}
