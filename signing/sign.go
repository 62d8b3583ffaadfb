package signing

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/signature/signer"
	"go.podman.io/image/v5/signature/sigstore"
)

// KeyError is a private key that cannot be used (not a sigstore key, a
// wrong passphrase): signing again with it cannot succeed.
type KeyError struct{ Err error }

func (e *KeyError) Error() string { return "load the signing key: " + e.Err.Error() }

func (e *KeyError) Unwrap() error { return e.Err }

// Sign adds a sigstore signature by key to image (repo@sha256:...) in
// its registry, as a `sha256-<digest>.sig` attachment. Signatures
// already there are kept, so an image signed before a key rotation stays
// verifiable by the old key too. Signing again with the same key adds
// nothing new for a verifier; containers/image may still append it.
//
// It is a copy of the image onto itself with a signer, what `skopeo copy
// --sign-by-sigstore-private-key` does: the manifest and blobs are
// already there, so only the signature is uploaded. The private key goes
// to a file readable only by this process (containers/image reads keys
// from files) and is removed before Sign returns.
//
// An attachment over a bound (too many or too large signatures to read,
// an *AttachmentError) is refused before anything is read or written:
// the copy would read all of its layers into memory.
func Sign(ctx context.Context, image string, key PrivateKey, reg Registry) error {
	named, ref, err := parseDigested(image)
	if err != nil {
		return err
	}
	// An *AttachmentError names image already.
	if err := checkAttachment(ctx, image, reg); err != nil {
		return err
	}
	dir, cleanup, err := tempDir()
	if err != nil {
		return err
	}
	defer cleanup()
	keyFile := filepath.Join(dir, "signing.key")
	if err := os.WriteFile(keyFile, key.PEM, 0o600); err != nil {
		return err
	}
	s, err := sigstore.NewSigner(sigstore.WithPrivateKeyFile(keyFile, key.Passphrase))
	if err != nil {
		// containers/image's message names the file and the cause
		// (wrong passphrase, not a key), never the key's bytes.
		return &KeyError{Err: err}
	}
	defer s.Close()
	sc, err := reg.systemContext(ctx, dir, named)
	if err != nil {
		return err
	}
	// Copying onto itself verifies nothing: the controller signs the
	// digest it built and pushed.
	pc, err := signature.NewPolicyContext(&signature.Policy{Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()}})
	if err != nil {
		return err
	}
	defer func() { _ = pc.Destroy() }()
	if _, err := copy.Image(ctx, pc, ref, ref, &copy.Options{
		Signers:         []*signer.Signer{s},
		SourceCtx:       sc,
		DestinationCtx:  sc,
		PreserveDigests: true,
	}); err != nil {
		return fmt.Errorf("sign %s: %w", image, err)
	}
	return nil
}
