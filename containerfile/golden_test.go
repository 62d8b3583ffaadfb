package containerfile

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const testBase = "registry.example.com/os/base@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// goldenCase is one testdata/golden/*.yaml input.
type goldenCase struct {
	ConfigName    string                            `json:"configName"`
	Pool          string                            `json:"pool"`
	Arch          string                            `json:"arch"`
	BaseImage     string                            `json:"baseImage"`
	Spec          v1alpha1.MachineConfigSpec        `json:"spec"`
	ContainerFile []v1alpha1.MachineOSContainerfile `json:"containerFile"`
}

func loadCase(t testing.TB, path string) Input {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c goldenCase
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	in := Input{ConfigName: c.ConfigName, Pool: c.Pool, Arch: c.Arch, BaseImage: c.BaseImage, Spec: &c.Spec, Containerfiles: c.ContainerFile}
	if in.ConfigName == "" {
		in.ConfigName = "rendered-worker-" + strings.TrimSuffix(filepath.Base(path), ".yaml")
	}
	if in.Pool == "" {
		in.Pool = "worker"
	}
	if in.Arch == "" {
		in.Arch = "amd64"
	}
	if in.BaseImage == "" {
		in.BaseImage = testBase
	}
	return in
}

func TestGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/golden/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 10 {
		t.Fatalf("found %d golden cases, want at least 10", len(cases))
	}
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			res, err := Render(loadCase(t, path))
			if err != nil {
				t.Fatal(err)
			}
			got := dump(t, res)
			golden := strings.TrimSuffix(path, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./containerfile/ -run TestGolden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the rendering; run with -update and review the diff.\ngot:\n%s", golden, got)
			}
		})
	}
}

// dump is a reviewable text form of everything Render returns.
func dump(t testing.TB, r *Result) []byte {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "== input hash %s, needs run %v\n", r.InputHash, r.NeedsRun)
	for _, f := range r.Context {
		fmt.Fprintf(&b, "== %s (%d bytes)\n", f.Name, len(f.Data))
		if f.Name == RootfsName {
			dumpTar(t, &b, f.Data)
			continue
		}
		b.WriteString(printable(f.Data))
	}
	items, err := json.MarshalIndent(r.NodeItems, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "== node items\n%s\n== labels\n", items)
	keys := make([]string, 0, len(r.Labels))
	for k := range r.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, r.Labels[k])
	}
	b.WriteString("== annotations\n")
	for _, k := range slices.Sorted(maps.Keys(r.Annotations)) {
		fmt.Fprintf(&b, "%s=%s\n", k, r.Annotations[k])
	}
	return []byte(b.String())
}

func dumpTar(t testing.TB, b *strings.Builder, data []byte) {
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		mode := fs.FileMode(h.Mode).Perm()
		if h.Mode&0o4000 != 0 {
			mode |= fs.ModeSetuid
		}
		if h.Mode&0o2000 != 0 {
			mode |= fs.ModeSetgid
		}
		if h.Mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		fmt.Fprintf(b, "%c %s %d:%d %s mtime=%d", h.Typeflag, mode, h.Uid, h.Gid, h.Name, h.ModTime.Unix())
		switch h.Typeflag {
		case tar.TypeSymlink, tar.TypeLink:
			fmt.Fprintf(b, " -> %s\n", h.Linkname)
		case tar.TypeReg:
			fmt.Fprintf(b, " size=%d sha256=%x\n", h.Size, sha256.Sum256(body))
			b.WriteString(printable(body))
		default:
			b.WriteString("\n")
		}
	}
}

// printable indents text content, and summarises binary content.
func printable(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return fmt.Sprintf("    <binary, sha256=%x>\n", sha256.Sum256(data))
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if l != "" {
			b.WriteString("    | " + strings.TrimSuffix(l, "\n") + "\n")
		}
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		b.WriteString("    (no newline at end)\n")
	}
	return b.String()
}
