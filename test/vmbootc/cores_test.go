package vmbootc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOrigin: a deployment not made from an image has no image; an
// origin naming an image bootc's way is read by ostreeimage, which
// refuses what Strata's nodes do not use.
func TestReadOrigin(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{"bootc's", "[origin]\ncontainer-image-reference=ostree-unverified-registry:127.0.0.1:5000/os@sha256:ab\n", "127.0.0.1:5000/os@sha256:ab", ""},
		{"an ostree refspec origin has no image", "[origin]\nrefspec=0123abcd\n", "", ""},
		{"empty", "", "", ""},
		{"signed transport", "[origin]\ncontainer-image-reference=ostree-image-signed:registry:quay.io/x/os:1\n", "", "only ostree-unverified-registry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".origin")
			if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			o, err := readOrigin(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) {
					t.Errorf("readOrigin(%q) = %+v, %v; want an error naming the file and %q", tc.in, o, err, tc.err)
				}
				return
			}
			if err != nil || o.Image != tc.want {
				t.Errorf("readOrigin(%q) = %+v, %v; want image %q", tc.in, o, err, tc.want)
			}
		})
	}
	if o, err := readOrigin(filepath.Join(dir, "missing.origin")); err != nil || o.Image != "" {
		t.Errorf("no origin file: %+v, %v", o, err)
	}
}
