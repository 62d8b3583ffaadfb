package main

import (
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
