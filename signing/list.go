package signing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Attachments lists the sigstore signatures stored for image
// (repo@sha256:...) under its `sha256-<hex>.sig` tag, and that tag; none
// when the tag does not exist. It reads, it does not verify (VerifyEach).
func Attachments(ctx context.Context, image string, reg Registry) (tag string, sigs []Attached, err error) {
	t, err := attachmentTag(image, reg)
	if err != nil {
		return "", nil, err
	}
	// The manifest only, bounded as for a verification; its layers are
	// listed, however many, to show what a verification refuses.
	c, err := newRegistryClient(ctx, t.Context(), reg)
	if err != nil {
		return t.String(), nil, fmt.Errorf("read the signatures of %s: %w", image, err)
	}
	body, err := c.manifest(ctx, t.TagStr(), MaxAttachmentManifestBytes)
	var tooLarge *manifestTooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return t.String(), nil, &AttachmentError{Image: image, Attachment: t.String(), What: "bytes of manifest", Got: tooLarge.size, Limit: MaxAttachmentManifestBytes}
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
		if l.MediaType == "application/vnd.dev.cosign.simplesigning.v1+json" {
			sigs = append(sigs, Attached{Digest: l.Digest.String()})
		}
	}
	return t.String(), sigs, nil
}

// imageRepo drops a tag from repo (host/path[:tag]).
func imageRepo(repo string) string {
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		return repo[:i]
	}
	return repo
}
