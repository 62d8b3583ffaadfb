// Package imageref holds the one check of the form Strata pins images
// by: a sha256 digest of 64 lowercase hex digits, alone or after a
// registry/repository. The CRDs check the same forms with CEL rules
// (api/v1alpha1 DigestedPullSpecPattern and the +kubebuilder markers);
// Go code calls this package instead of writing the check again.
package imageref

import (
	"regexp"
	"strings"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// DigestPrefix starts every digest Strata accepts.
const DigestPrefix = "sha256:"

// digestHexLen is the length of a sha256 digest in hex.
const digestHexLen = 64

// ValidDigest says whether d is sha256:<64 lowercase hex digits>, the
// only digest form Strata pins, records and verifies images by.
func ValidDigest(d string) bool {
	hex, ok := strings.CutPrefix(d, DigestPrefix)
	if !ok || len(hex) != digestHexLen {
		return false
	}
	for i := range len(hex) {
		if c := hex[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// pinned is the CRDs' own pattern, so that Go and the API server agree on
// which pull specs are pinned.
var pinned = regexp.MustCompile(v1alpha1.DigestedPullSpecPattern)

// ValidPinned says whether spec is registry/repository@sha256:<64 hex>,
// the only form nodes pull: what runs is then exactly what was built.
func ValidPinned(spec string) bool {
	return pinned.MatchString(spec)
}
