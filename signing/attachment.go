package signing

import (
	"context"
	"encoding/json"

	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"

	"github.com/strata-dev/strata/signing/attached"
)

// The bounds on a `sha256-<hex>.sig` attachment, checked on its
// manifest and its layers' sizes, reading no layer, before
// containers/image sees it: containers/image reads every layer of the
// attachment into memory (package attached says why each bound is what
// it is).
const (
	MaxAttachmentLayers        = attached.MaxLayers
	MaxAttachmentBytes         = attached.MaxBytes
	MaxAttachmentManifestBytes = attached.MaxManifestBytes
)

// AttachmentError is an image's signature attachment that is not read
// because it is over a bound: too many layers, too large in sum, or a
// manifest too large. Verify returns it inside a *RefusedError.
type AttachmentError = attached.AttachmentError

// checkAttachment refuses image's attachment, with an *AttachmentError,
// when it is over a bound.
func checkAttachment(ctx context.Context, image string, reg Registry) error {
	return attached.Check(ctx, image, reg.attached())
}

// readsSignatures says whether evaluating p for ref reads ref's
// signatures: whether the requirements that apply to it, chosen as
// containers/image chooses them (the most specific scope of ref's
// transport, then the default), include one that is neither
// insecureAcceptAnything nor reject. Only then is the attachment checked,
// so that a policy that accepts or rejects a repository outright is not
// changed by what its attachments hold.
func readsSignatures(p *signature.Policy, ref types.ImageReference) bool {
	reqs := p.Default
	if scopes, ok := p.Transports[ref.Transport().Name()]; ok {
		for _, s := range append([]string{ref.PolicyConfigurationIdentity()}, append(ref.PolicyConfigurationNamespaces(), "")...) {
			if r, ok := scopes[s]; ok {
				reqs = r
				break
			}
		}
	}
	for _, r := range reqs {
		b, err := json.Marshal(r)
		if err != nil {
			return true
		}
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &t); err != nil || (t.Type != "insecureAcceptAnything" && t.Type != "reject") {
			return true
		}
	}
	return false
}
