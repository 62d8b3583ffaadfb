package signing

import (
	"context"

	"github.com/strata-dev/strata/signing/attached"
)

// Attached is one sigstore signature found in an image's attachment.
type Attached = attached.Signature

// Attachments lists the sigstore signatures stored for image
// (repo@sha256:...) under its `sha256-<hex>.sig` tag, and that tag; none
// when the tag does not exist. It reads, it does not verify.
func Attachments(ctx context.Context, image string, reg Registry) (tag string, sigs []Attached, err error) {
	return attached.List(ctx, image, reg.attached())
}
