package signing

import (
	"context"
	"errors"
	"fmt"

	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/signature"

	"github.com/strata-dev/strata/sigpolicy"
)

// RefusedError is an image the keys do not accept: unsigned, signed by
// another key, with a signature that does not verify, or with a
// signature attachment over a bound (an *AttachmentError, not read).
type RefusedError struct {
	Image string
	Err   error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("image %s is not signed by a trusted key: %v", e.Image, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Verify accepts image (repo@sha256:...) when at least one of its
// sigstore signatures verifies with one of keys and names image's
// repository, as a node's policy (sigpolicy.NodePolicy) does. A refusal is a
// *RefusedError; any other error is the registry's or the input's.
func Verify(ctx context.Context, image string, keys [][]byte, reg Registry) error {
	if err := sigpolicy.CheckPublicKeys(keys); err != nil {
		return fmt.Errorf("public keys: %w", err)
	}
	req, err := signature.NewPRSigstoreSigned(
		signature.PRSigstoreSignedWithKeyDatas(keys),
		signature.PRSigstoreSignedWithSignedIdentity(signature.NewPRMMatchRepository()))
	if err != nil {
		return err
	}
	return evaluate(ctx, image, &signature.Policy{Default: signature.PolicyRequirements{req}}, reg)
}

// VerifyPolicy evaluates image against policy (a policy.json's bytes),
// as containers/image does when bootc pulls with
// --enforce-container-sigpolicy: registries.d says use-sigstore-
// attachments for every registry.
func VerifyPolicy(ctx context.Context, image string, policyJSON []byte, reg Registry) error {
	p, err := signature.NewPolicyFromBytes(policyJSON)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	return evaluate(ctx, image, p, reg)
}

func evaluate(ctx context.Context, img string, p *signature.Policy, reg Registry) error {
	named, ref, err := parseDigested(img)
	if err != nil {
		return err
	}
	dir, cleanup, err := tempDir()
	if err != nil {
		return err
	}
	defer cleanup()
	// containers/image reads every layer of the attachment into memory:
	// bound it first, reading no layer.
	if readsSignatures(p, ref) {
		err := checkAttachment(ctx, img, reg)
		var over *AttachmentError
		if errors.As(err, &over) {
			return &RefusedError{Image: img, Err: err}
		}
		if err != nil {
			return err
		}
	}
	sc, err := reg.systemContext(ctx, dir, named)
	if err != nil {
		return err
	}
	pc, err := signature.NewPolicyContext(p)
	if err != nil {
		return err
	}
	defer func() { _ = pc.Destroy() }()
	src, err := ref.NewImageSource(ctx, sc)
	if err != nil {
		return fmt.Errorf("open %s: %w", img, err)
	}
	defer func() { _ = src.Close() }()
	ok, err := pc.IsRunningImageAllowed(ctx, image.UnparsedInstance(src, nil))
	// A rejection is a PolicyRequirementError, or with a single
	// signature that signature's own InvalidSignatureError; anything else
	// (a registry that did not answer) is not the image's fault.
	var denied signature.PolicyRequirementError
	var invalid signature.InvalidSignatureError
	switch {
	case errors.As(err, &denied), errors.As(err, &invalid):
		return &RefusedError{Image: img, Err: err}
	case err != nil:
		return fmt.Errorf("verify %s: %w", img, err)
	case !ok:
		return &RefusedError{Image: img, Err: errors.New("the policy refuses it")}
	}
	return nil
}
