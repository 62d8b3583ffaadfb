package main

import (
	"os"
	"path/filepath"
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
