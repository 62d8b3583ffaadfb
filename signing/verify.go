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

// KeyResult says whether an image has a valid signature by one key.
type KeyResult struct {
	// Fingerprint names the key (sigpolicy.Fingerprint).
	Fingerprint string
	// Verified is true when a signature by this key verifies.
	Verified bool
	// Reason says why not, when not.
	Reason string
}

// VerifyEach verifies image with each key on its own: which of the keys
// signed it (stratactl inspect, the signing identity). A registry error
// is returned; a refusal is a result.
func VerifyEach(ctx context.Context, image string, keys [][]byte, reg Registry) ([]KeyResult, error) {
	res := make([]KeyResult, 0, len(keys))
	for i, k := range keys {
		fp, err := sigpolicy.Fingerprint(k)
		if err != nil {
			return nil, fmt.Errorf("public key [%d]: %w", i, err)
		}
		r := KeyResult{Fingerprint: fp}
		err = Verify(ctx, image, [][]byte{k}, reg)
		var refused *RefusedError
		switch {
		case errors.As(err, &refused):
			r.Reason = refused.Err.Error()
		case err != nil:
			return nil, err
		default:
			r.Verified = true
		}
		res = append(res, r)
	}
	return res, nil
}

// Attached is one sigstore signature found in an image's attachment.
type Attached struct {
	// Digest is the signature layer's digest.
	Digest string `json:"digest"`
}
