package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzDecodeObject feeds arbitrary documents to the decoder of render's
// input: it must not panic, and what it accepts must be one named object
// of a kind render knows.
func FuzzDecodeObject(f *testing.F) {
	for _, glob := range []string{"testdata/*.yaml", "testdata/corpus-openshift/*.yaml"} {
		paths, err := filepath.Glob(glob)
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			for _, doc := range strings.Split(string(data), "\n---\n") {
				f.Add([]byte(doc))
			}
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return
		}
		objs, problems := decodeObject(object{file: "fuzz.yaml", doc: 1}, js)
		for _, p := range problems {
			if !strings.HasPrefix(p, "fuzz.yaml: ") {
				t.Errorf("problem does not name the file: %q", p)
			}
		}
		for _, o := range objs {
			n := 0
			name := ""
			if o.mc != nil {
				n, name = n+1, o.mc.Name
			}
			if o.mcp != nil {
				n, name = n+1, o.mcp.Name
			}
			if o.mosc != nil {
				n, name = n+1, o.mosc.Name
			}
			if n != 1 || name == "" {
				t.Errorf("decoded %d objects, name %q, from %q", n, name, doc)
			}
		}
	})
}

// TestSplitDocuments splits as YAML defines documents: "..." ends one, and
// what follows it is the next even without "---". Documents without text
// are left out here.
func TestSplitDocuments(t *testing.T) {
	type doc struct {
		raw  string
		line int
	}
	tests := []struct {
		in   string
		want []doc
	}{
		{"a: 1\n---\nb: 2\n", []doc{{"a: 1\n", 1}, {"b: 2\n", 3}}},
		{"a: 1\n...\nb: 2\n", []doc{{"a: 1\n", 1}, {"b: 2\n", 3}}},
		{"a: 1\n...\n---\nb: 2\n...\n", []doc{{"a: 1\n", 1}, {"b: 2\n", 4}}},
		{"a: 1\n... # end\nb: 2", []doc{{"a: 1\n", 1}, {"b: 2", 3}}},
		{"--- # first\na: |\n  ...\n  ---x\n", []doc{{"a: |\n  ...\n  ---x\n", 2}}},
		{"a: ...b\n---x: 1\n....\n", []doc{{"a: ...b\n---x: 1\n....\n", 1}}},
	}
	for _, tc := range tests {
		docs, err := splitDocuments(strings.NewReader(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		var got []doc
		for _, d := range docs {
			if len(d.raw) > 0 {
				got = append(got, doc{string(d.raw), d.line})
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzLineOf: finding a field's line in a document must not panic on any
// document or path, and gives a line of the document or 0.
func FuzzLineOf(f *testing.F) {
	f.Add([]byte("spec:\n  config:\n    storage:\n      files:\n      - path: x\n"), "spec.config.storage.files[0].path", 3)
	f.Add([]byte("a: &x {b: 1}\nc: *x\n"), "c.b", 1)
	f.Add([]byte("items:\n- spec: {}\n"), "spec[0][x].", 1)
	f.Fuzz(func(t *testing.T, raw []byte, path string, start int) {
		start = 1 + start&0xffff
		o := object{file: "f.yaml", src: document{raw: raw, line: start}}
		line := o.lineOf(path)
		if line != 0 && (line < start || line > start+bytes.Count(raw, []byte("\n"))) {
			t.Errorf("line %d outside the document (lines %d on) for %q in %q", line, start, path, raw)
		}
	})
}

func TestPathSteps(t *testing.T) {
	got := pathSteps("spec.config.storage.files[2].contents.source")
	want := []any{"spec", "config", "storage", "files", 2, "contents", "source"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// FuzzSplitDocuments: splitting loses no line but the markers, and each
// document starts on the line it says.
func FuzzSplitDocuments(f *testing.F) {
	f.Add("a: 1\n...\nb: 2\n---\nc: 3")
	f.Add("--- # x\n... \n....\n---x\n")
	f.Fuzz(func(t *testing.T, in string) {
		docs, err := splitDocuments(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		var kept strings.Builder
		lines := strings.SplitAfter(in, "\n")
		for _, l := range lines {
			if !isMarker([]byte(l), "---") && !isMarker([]byte(l), "...") {
				kept.WriteString(l)
			}
		}
		var got strings.Builder
		for _, d := range docs {
			if len(d.raw) > 0 {
				first, _, _ := strings.Cut(string(d.raw), "\n")
				if d.line < 1 || d.line > len(lines) || !strings.HasPrefix(lines[d.line-1], first) {
					t.Errorf("document %q says it starts on line %d", d.raw, d.line)
				}
			}
			got.Write(d.raw)
		}
		if got.String() != kept.String() {
			t.Errorf("split %q into %q", in, got.String())
		}
	})
}
