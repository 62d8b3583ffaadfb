package attached

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SignatureMediaType is the media type of a sigstore signature layer:
// its content is the signed simple-signing payload.
const SignatureMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"

// signatureAnnotation holds a layer's signature, base64, over the layer.
const signatureAnnotation = "dev.cosignproject.cosign/signature"

// Signature is one sigstore signature found in an image's attachment.
type Signature struct {
	// Digest is the signature layer's digest.
	Digest string `json:"digest"`
}

// List lists the sigstore signatures stored for image (repo@sha256:...)
// under its `sha256-<hex>.sig` tag, and that tag; none when the tag does
// not exist. It reads, it does not verify (VerifyEach). Unlike Check, an
// attachment with many layers is listed, to show what a verification
// refuses; only its manifest is read, bounded.
func List(ctx context.Context, image string, reg Registry) (tag string, sigs []Signature, err error) {
	t, err := Tag(image, reg)
	if err != nil {
		return "", nil, err
	}
	c, err := newRegistryClient(ctx, t.Context(), reg)
	if err != nil {
		return t.String(), nil, fmt.Errorf("read the signatures of %s: %w", image, err)
	}
	body, err := c.manifest(ctx, t.TagStr(), MaxManifestBytes)
	var tooLarge *manifestTooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return t.String(), nil, &AttachmentError{Image: image, Attachment: t.String(), What: "bytes of manifest", Got: tooLarge.size, Limit: MaxManifestBytes}
	case err != nil:
		return t.String(), nil, fmt.Errorf("read the signatures of %s: %w", image, err)
	case body == nil:
		return t.String(), nil, nil
	}
	m, err := v1.ParseManifest(bytes.NewReader(body))
	if err != nil {
		return t.String(), nil, fmt.Errorf("read the signatures of %s: %w", image, err)
	}
	for _, l := range m.Layers {
		if l.MediaType == SignatureMediaType {
			sigs = append(sigs, Signature{Digest: l.Digest.String()})
		}
	}
	return t.String(), sigs, nil
}
