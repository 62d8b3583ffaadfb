package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/machineconfig"
	"github.com/strata-dev/strata/sbom"
)

// TestCorpusSBOM: every corpus file that renders for its pool also gets
// an SBOM, and the SBOM lists each path of its configuration layer once
// with that entry's mode and owner. A real MachineConfig whose SBOM could
// not be written would fail its build at the attach stage, after the image
// was pushed.
func TestCorpusSBOM(t *testing.T) {
	generated, files := 0, 0
	for _, tc := range corpusCases {
		if tc.refused != "" {
			continue
		}
		t.Run(strings.TrimSuffix(tc.file, ".yaml"), func(t *testing.T) {
			spec, res := renderCorpusSpec(t, filepath.Join("testdata/corpus", tc.file), tc.pool)
			var layer []byte
			for _, f := range res.Context {
				if f.Name == containerfile.RootfsName {
					layer = f.Data
				}
			}
			doc, err := sbom.Generate(sbom.Input{
				Image: "registry.example.com/os/worker", ImageDigest: "sha256:" + strings.Repeat("2", 64), BaseImage: base,
				Pool: "corpus", RenderedConfig: "rendered-corpus", InputHash: res.InputHash, Layer: layer, Spec: spec,
			})
			if err != nil {
				t.Fatalf("no SBOM: %v", err)
			}
			d, err := sbom.Read(doc)
			if err != nil {
				t.Fatal(err)
			}
			want := layerEntries(t, layer)
			if len(d.Files) != len(want) {
				t.Errorf("the SBOM lists %d paths, the layer has %d", len(d.Files), len(want))
			}
			for _, f := range d.Files {
				e, ok := want[f.Path]
				if !ok {
					t.Errorf("%s is in the SBOM, not in the layer", f.Path)
					continue
				}
				if f.Mode != e.mode || f.UID != e.uid || f.GID != e.gid || f.Type != e.kind {
					t.Errorf("%s: SBOM %s %s %d:%d, layer %s %s %d:%d", f.Path, f.Type, f.Mode, f.UID, f.GID, e.kind, e.mode, e.uid, e.gid)
				}
			}
			if !slices.Equal(d.Configuration.KernelArguments, spec.KernelArguments) && len(spec.KernelArguments) > 0 {
				t.Errorf("kernel arguments %q, the spec's %q", d.Configuration.KernelArguments, spec.KernelArguments)
			}
			generated++
			files += len(d.Files)
		})
	}
	t.Logf("%d corpus files, %d paths in their SBOMs", generated, files)
	// 30 of the 40 render, and most of those write files: a count near
	// zero means the corpus stopped reaching the layer.
	if generated < 25 || files < generated {
		t.Fatalf("%d corpus files gave SBOMs listing %d paths in all", generated, files)
	}
}

// renderCorpusSpec merges and renders a corpus file as stratactl render
// does: the MachineConfigs the pool selects (pool "" selects all).
func renderCorpusSpec(t *testing.T, file, pool string) (*v1alpha1.MachineConfigSpec, *containerfile.Result) {
	t.Helper()
	objs, err := readObjects(file)
	if err != nil {
		t.Fatal(err)
	}
	var mcs []v1alpha1.MachineConfig
	pools := map[string]object{}
	for _, o := range objs {
		switch {
		case o.mc != nil:
			mcs = append(mcs, *o.mc)
		case o.mcp != nil:
			pools[o.mcp.Name] = o
		}
	}
	selected := mcs
	if pool != "" {
		selector, _, _, _ := poolSelector(pool, pools, nil)
		if selected, _, err = machineconfig.Select(selector, mcs); err != nil {
			t.Fatal(err)
		}
	}
	if len(selected) == 0 {
		t.Fatalf("pool %q selects no MachineConfig of %s", pool, file)
	}
	spec, err := machineconfig.Merge(selected)
	if err != nil {
		t.Fatal(err)
	}
	res, err := containerfile.Render(containerfile.Input{ConfigName: "rendered-corpus", Pool: "corpus", Spec: &spec, BaseImage: base, Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	return &spec, res
}

// layerEntry is what a configuration layer makes of one path.
type layerEntry struct {
	kind, mode string
	uid, gid   int
}

// layerEntries reads a configuration layer: each path as its last entry
// makes it, as the image's build does.
func layerEntries(t *testing.T, layer []byte) map[string]layerEntry {
	t.Helper()
	out := map[string]layerEntry{}
	if len(layer) == 0 {
		return out
	}
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		p := path.Clean("/" + hdr.Name)
		if p == "/" {
			continue
		}
		kind := map[byte]string{tar.TypeReg: "file", tar.TypeDir: "directory", tar.TypeSymlink: "symlink", tar.TypeLink: "hardlink"}[hdr.Typeflag]
		out[p] = layerEntry{kind: kind, mode: fmt.Sprintf("%04o", hdr.Mode&0o7777), uid: hdr.Uid, gid: hdr.Gid}
	}
}
