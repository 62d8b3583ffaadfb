package sbom_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/nodeconfig"
	"github.com/strata-dev/strata/sbom"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const (
	baseImage   = "registry.example.com/os/base@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	imageDigest = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// renderSample renders the worker sample MachineConfig as the build
// controller would, with a directory, a link and a masked unit added.
func renderSample(t testing.TB) (*v1alpha1.MachineConfigSpec, *containerfile.Result) {
	t.Helper()
	raw, err := os.ReadFile("../config/samples/machineconfiguration_v1alpha1_machineconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var mc v1alpha1.MachineConfig
	if err := yaml.UnmarshalStrict(raw, &mc); err != nil {
		t.Fatal(err)
	}
	var ign map[string]any
	if err := json.Unmarshal(mc.Spec.Config.Raw, &ign); err != nil {
		t.Fatal(err)
	}
	storage := ign["storage"].(map[string]any)
	storage["directories"] = []any{map[string]any{"path": "/etc/strata", "mode": 0o750, "user": map[string]any{"id": 1000}}}
	storage["links"] = []any{map[string]any{"path": "/etc/strata/current", "target": "/etc/chrony.d/strata.conf"}}
	systemd := ign["systemd"].(map[string]any)
	systemd["units"] = append(systemd["units"].([]any), map[string]any{"name": "debug-shell.service", "mask": true})
	mc.Spec.Config.Raw, err = json.Marshal(ign)
	if err != nil {
		t.Fatal(err)
	}
	res, err := containerfile.Render(containerfile.Input{
		ConfigName: "rendered-worker-abc", Pool: "worker", Spec: &mc.Spec, BaseImage: baseImage, Arch: "amd64",
	})
	if err != nil {
		t.Fatal(err)
	}
	return &mc.Spec, res
}

func layerOf(t testing.TB, res *containerfile.Result) []byte {
	t.Helper()
	for _, f := range res.Context {
		if f.Name == containerfile.RootfsName {
			return f.Data
		}
	}
	t.Fatal("the render has no configuration layer")
	return nil
}

func sampleInput(t testing.TB) sbom.Input {
	spec, res := renderSample(t)
	return sbom.Input{
		Image:          "registry.example.com/os/worker",
		ImageDigest:    imageDigest,
		BaseImage:      baseImage,
		Pool:           "worker",
		RenderedConfig: "rendered-worker-abc",
		InputHash:      res.InputHash,
		Layer:          layerOf(t, res),
		Spec:           spec,
	}
}

func TestGolden(t *testing.T) {
	doc, err := sbom.Generate(sampleInput(t))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "worker.spdx.json")
	if *update {
		if err := os.WriteFile(golden, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, want) {
		t.Errorf("the SBOM differs from %s (go test ./sbom -update rewrites it):\n%s", golden, doc)
	}
}

func TestDeterministic(t *testing.T) {
	in := sampleInput(t)
	a, err := sbom.Generate(in)
	if err != nil {
		t.Fatal(err)
	}
	// A second render of the same configuration, not the same bytes.
	b, err := sbom.Generate(sampleInput(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the same input gave two SBOMs")
	}
	in.ImageDigest = "sha256:" + strings.Repeat("3", 64)
	c, err := sbom.Generate(in)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, c) {
		t.Fatal("another image gave the same SBOM")
	}
}

// TestSchema validates the SBOM against SPDX 2.3's own JSON schema.
func TestSchema(t *testing.T) {
	doc, err := sbom.Generate(sampleInput(t))
	if err != nil {
		t.Fatal(err)
	}
	validate(t, "testdata/spdx-schema-2.3.json", doc)

	// The schema is strict enough to catch a broken document.
	var broken map[string]any
	if err := json.Unmarshal(doc, &broken); err != nil {
		t.Fatal(err)
	}
	broken["files"].([]any)[0].(map[string]any)["checksums"] = "none"
	b, _ := json.Marshal(broken)
	if err := validateErr("testdata/spdx-schema-2.3.json", b); err == nil {
		t.Fatal("the schema accepted a file whose checksums are a string")
	}
}

func validate(t *testing.T, schemaFile string, doc []byte) {
	t.Helper()
	if err := validateErr(schemaFile, doc); err != nil {
		t.Fatalf("%s does not validate: %v\n%s", schemaFile, err, doc)
	}
}

func validateErr(schemaFile string, doc []byte) error {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(schemaFile)
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// TestEveryEntry: every entry of the configuration layer is in the SBOM
// with its digest, mode and owner, and nothing else is.
func TestEveryEntry(t *testing.T) {
	in := sampleInput(t)
	d := generateAndRead(t, in)
	got := map[string]sbom.File{}
	for _, f := range d.Files {
		got[f.Path] = f
	}
	tr := tar.NewReader(bytes.NewReader(in.Layer))
	n := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := path.Clean("/" + hdr.Name)
		if p == "/" {
			continue
		}
		n++
		f, ok := got[p]
		if !ok {
			t.Errorf("%s is in the layer, not in the SBOM", p)
			continue
		}
		if want := fmt.Sprintf("%04o", hdr.Mode&0o7777); f.Mode != want || f.UID != hdr.Uid || f.GID != hdr.Gid {
			t.Errorf("%s: SBOM says mode %s owner %d:%d, the layer %s %d:%d", p, f.Mode, f.UID, f.GID, want, hdr.Uid, hdr.Gid)
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			if f.Type != "file" || f.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("%s: SBOM says %s sha256 %s, the layer has a file with sha256 %x", p, f.Type, f.SHA256, sum)
			}
		case tar.TypeDir:
			if f.Type != "directory" {
				t.Errorf("%s: SBOM says %s, the layer a directory", p, f.Type)
			}
		case tar.TypeSymlink:
			if f.Type != "symlink" || f.Target != hdr.Linkname {
				t.Errorf("%s: SBOM says %s to %q, the layer a symlink to %q", p, f.Type, f.Target, hdr.Linkname)
			}
		}
	}
	if n != len(d.Files) {
		t.Errorf("the layer has %d entries, the SBOM %d files", n, len(d.Files))
	}
	for _, p := range []string{"/etc/chrony.d/strata.conf", "/etc/strata", "/etc/strata/current", "/usr/lib/bootc/kargs.d/10-strata.toml", "/etc/systemd/system/debug-shell.service"} {
		if _, ok := got[p]; !ok {
			t.Errorf("%s is not in the SBOM", p)
		}
	}
	if dir := got["/etc/strata"]; dir.Mode != "0750" || dir.UID != 1000 {
		t.Errorf("/etc/strata: SBOM says mode %s uid %d, want 0750 uid 1000", dir.Mode, dir.UID)
	}

	c := d.Configuration
	if strings.Join(c.KernelArguments, " ") != "nosmt" {
		t.Errorf("kernel arguments %q, want [nosmt]", c.KernelArguments)
	}
	units := map[string]nodeconfig.Unit{}
	for _, u := range c.Units {
		units[u.Name] = u
	}
	if u := units["strata-time-sync.service"]; !u.Enabled || !u.Contents {
		t.Errorf("strata-time-sync.service: %+v, want enabled with contents", u)
	}
	if u := units["debug-shell.service"]; !u.Masked {
		t.Errorf("debug-shell.service: %+v, want masked", u)
	}
	if d.Base != "registry.example.com/os/base" || d.BaseDigest != strings.TrimPrefix(baseImage, "registry.example.com/os/base@") {
		t.Errorf("base %s %s", d.Base, d.BaseDigest)
	}
	if d.Image != in.Image || d.ImageDigest != in.ImageDigest || c.Pool != "worker" || c.InputHash != in.InputHash {
		t.Errorf("image %s@%s pool %s hash %s", d.Image, d.ImageDigest, c.Pool, c.InputHash)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*sbom.Input)
	}{
		{"image", func(in *sbom.Input) { in.Image = "registry.example.com/os/worker:latest" }},
		{"image", func(in *sbom.Input) { in.Image = "" }},
		{"imageDigest", func(in *sbom.Input) { in.ImageDigest = "sha256:abc" }},
		{"baseImage", func(in *sbom.Input) { in.BaseImage = "registry.example.com/os/base:latest" }},
		{"pool", func(in *sbom.Input) { in.Pool = "" }},
		{"renderedConfig", func(in *sbom.Input) { in.RenderedConfig = "" }},
		{"inputHash", func(in *sbom.Input) { in.InputHash = "not hex" }},
		{"layer", func(in *sbom.Input) {
			in.Layer = []byte("not a tar archive, long enough to be read as a header block......")
		}},
	} {
		in := sampleInput(t)
		tc.edit(&in)
		_, err := sbom.Generate(in)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming %s", tc.field, err, tc.field)
		}
	}
}

// TestEmpty: a configuration without files still describes its image.
func TestEmpty(t *testing.T) {
	doc, err := sbom.Generate(sbom.Input{
		Image: "registry.example.com/os/worker", ImageDigest: imageDigest, BaseImage: baseImage,
		Pool: "worker", RenderedConfig: "rendered-worker-0", InputHash: "00",
	})
	if err != nil {
		t.Fatal(err)
	}
	validate(t, "testdata/spdx-schema-2.3.json", doc)
	d, err := sbom.Read(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 0 || d.Image != "registry.example.com/os/worker" {
		t.Fatalf("%+v", d)
	}
}

// layer writes a tar of the given entries, each a regular file unless its
// header says otherwise.
func layer(t testing.TB, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		body := []byte(h.Linkname)
		if h.Typeflag == tar.TypeReg {
			h.Size, h.Linkname = int64(len(body)), ""
		} else {
			body = nil
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestLastEntryOfAPathWins: a layer that names a path twice makes what
// the last entry says, so the SBOM lists that one, once.
func TestLastEntryOfAPathWins(t *testing.T) {
	in := sampleInput(t)
	// Linkname carries a regular file's content (see layer).
	in.Layer = layer(t,
		tar.Header{Name: "etc/motd", Mode: 0o644, Linkname: "first"},
		tar.Header{Name: "etc/issue", Mode: 0o644, Linkname: "issue"},
		tar.Header{Name: "./etc/motd", Mode: 0o600, Uid: 7, Linkname: "second"},
	)
	d := generateAndRead(t, in)
	var motd []sbom.File
	for _, f := range d.Files {
		if f.Path == "/etc/motd" {
			motd = append(motd, f)
		}
	}
	sum := sha256.Sum256([]byte("second"))
	if len(motd) != 1 || motd[0].SHA256 != hex.EncodeToString(sum[:]) || motd[0].Mode != "0600" || motd[0].UID != 7 {
		t.Fatalf("/etc/motd in the SBOM: %+v, want once, as the last entry made it (sha256 %x, 0600, uid 7)", motd, sum)
	}
	if len(d.Files) != 2 {
		t.Errorf("%d files, want 2: %+v", len(d.Files), d.Files)
	}
}

func TestNamesThatAreNotUTF8AreRefused(t *testing.T) {
	for _, h := range []tar.Header{
		{Name: "etc/caf\xe9", Mode: 0o644},
		{Name: "etc/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/caf\xe9", Mode: 0o777},
	} {
		in := sampleInput(t)
		in.Layer = layer(t, h)
		if _, err := sbom.Generate(in); err == nil || !strings.Contains(err.Error(), "layer") || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("%s: error %v, want one saying the layer has a name that is not UTF-8", h.Name, err)
		}
	}
}

// FuzzGenerate: whatever the layer, Generate either says what is wrong
// with it or writes an SBOM that Read reads back with one file per path.
func FuzzGenerate(f *testing.F) {
	in := sampleInput(f)
	f.Add(in.Layer)
	f.Add(layer(f, tar.Header{Name: "a", Linkname: "x"}, tar.Header{Name: "./a", Linkname: "y"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := in
		in.Layer = data
		doc, err := sbom.Generate(in)
		if err != nil {
			return
		}
		d, err := sbom.Read(doc)
		if err != nil {
			t.Fatalf("Read of a generated SBOM: %v", err)
		}
		seen := map[string]bool{}
		for _, file := range d.Files {
			if seen[file.Path] || !strings.HasPrefix(file.Path, "/") {
				t.Fatalf("file %q listed twice or not absolute", file.Path)
			}
			seen[file.Path] = true
		}
	})
}

// generateAndRead is the description Read gives of the SBOM of in.
func generateAndRead(t *testing.T, in sbom.Input) *sbom.Description {
	t.Helper()
	doc, err := sbom.Generate(in)
	if err != nil {
		t.Fatal(err)
	}
	d, err := sbom.Read(doc)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sparseLayer is a layer of one file in the PAX sparse format 1.0 that
// claims size bytes and stores none. Go's tar writer writes no sparse
// file, so the blocks are made by hand: a PAX header with the GNU.sparse
// records, then the file's header (a regular file) and its sparse map
// (no data regions).
func sparseLayer(name string, size int64) []byte {
	var records string
	for _, kv := range [][2]string{
		{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"},
		{"GNU.sparse.name", name}, {"GNU.sparse.realsize", fmt.Sprint(size)},
	} {
		// A record's length counts its own digits.
		rec := " " + kv[0] + "=" + kv[1] + "\n"
		n := len(rec) + len(fmt.Sprint(len(rec)))
		n = len(rec) + len(fmt.Sprint(n))
		records += fmt.Sprint(n) + rec
	}
	sparseMap := "0\n" // no data regions
	var out []byte
	out = append(out, ustarBlock("PaxHeaders/"+name, 'x', len(records))...)
	out = append(out, padded(records)...)
	// The map is read a block at a time: the stored size is its block.
	out = append(out, ustarBlock(name, '0', len(padded(sparseMap)))...)
	out = append(out, padded(sparseMap)...)
	return append(out, make([]byte, 1024)...)
}

// ustarBlock is a ustar header block with its checksum.
func ustarBlock(name string, typeflag byte, size int) []byte {
	hdr := make([]byte, 512)
	copy(hdr[0:], name)
	copy(hdr[100:], "0000644\x00")
	copy(hdr[108:], "0000000\x00")
	copy(hdr[116:], "0000000\x00")
	copy(hdr[124:], fmt.Sprintf("%011o\x00", size))
	copy(hdr[136:], "00000000000\x00")
	hdr[156] = typeflag
	copy(hdr[257:], "ustar\x0000")
	copy(hdr[148:], "        ")
	sum := 0
	for _, b := range hdr {
		sum += int(b)
	}
	copy(hdr[148:], fmt.Sprintf("%06o\x00 ", sum))
	return hdr
}

func padded(s string) []byte {
	return append([]byte(s), make([]byte, (512-len(s)%512)%512)...)
}

// TestSparseFileIsRefused: a layer entry that claims more bytes than the
// layer holds is refused, not read as a terabyte of zeros.
func TestSparseFileIsRefused(t *testing.T) {
	in := sampleInput(t)
	in.Layer = sparseLayer("etc/huge", 1<<40)
	_, err := sbom.Generate(in)
	if err == nil || !strings.Contains(err.Error(), "etc/huge") || !strings.Contains(err.Error(), "more than the whole layer") {
		t.Fatalf("error %v, want one saying /etc/huge claims more than the layer", err)
	}
	// The same blocks with a size that fits are a file of zeros, so they
	// are a sparse file the tar reader understands.
	in.Layer = sparseLayer("etc/small", 16)
	d := generateAndRead(t, in)
	sum := sha256.Sum256(make([]byte, 16))
	if len(d.Files) != 1 || d.Files[0].Path != "/etc/small" || d.Files[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("files %+v, want /etc/small with 16 zero bytes", d.Files)
	}
}
