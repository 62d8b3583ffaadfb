package imageref

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, tc := range []struct {
		in             string
		digest, pinned bool
	}{
		{"sha256:" + hex, true, false},
		{"quay.io/x/os@sha256:" + hex, false, true},
		{"127.0.0.1:5000/strata/os@sha256:" + hex, false, true},
		{"localhost/os@sha256:" + hex, false, true},
		{"", false, false},
		{"sha256:", false, false},
		{"sha256:" + hex[:63], false, false},
		{"sha256:" + hex + "0", false, false},
		{"sha256:" + strings.ToUpper(hex), false, false},
		{"sha256:" + hex[:63] + "g", false, false},
		{"sha512:" + hex + hex, false, false},
		{"SHA256:" + hex, false, false},
		{" sha256:" + hex, false, false},
		{"sha256:" + hex + "\n", false, false},
		{"quay.io/x/os:42", false, false},
		{"quay.io/x/os@sha256:abc", false, false},
		{"os@sha256:" + hex, false, false},
		{"quay.io/x/os:42@sha256:" + hex, false, false},
		{"quay.io/x/os@sha256:" + strings.ToUpper(hex), false, false},
	} {
		if got := ValidDigest(tc.in); got != tc.digest {
			t.Errorf("ValidDigest(%q) = %v, want %v", tc.in, got, tc.digest)
		}
		if got := ValidPinned(tc.in); got != tc.pinned {
			t.Errorf("ValidPinned(%q) = %v, want %v", tc.in, got, tc.pinned)
		}
		// A pinned pull spec ends in a valid digest: the CRD pattern and
		// ValidDigest agree on the digest.
		if i := strings.LastIndexByte(tc.in, '@'); ValidPinned(tc.in) && !ValidDigest(tc.in[i+1:]) {
			t.Errorf("ValidPinned(%q) but its digest is not valid", tc.in)
		}
	}
}

// FuzzValidPinned: the CRD pattern never accepts a pull spec whose digest
// ValidDigest rejects.
func FuzzValidPinned(f *testing.F) {
	f.Add("quay.io/x/os@sha256:" + strings.Repeat("a", 64))
	f.Add("quay.io/x/os@sha256:" + strings.Repeat("A", 64))
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidPinned(s) {
			return
		}
		i := strings.LastIndexByte(s, '@')
		if i < 0 || !ValidDigest(s[i+1:]) {
			t.Errorf("ValidPinned(%q) with an invalid digest", s)
		}
	})
}
