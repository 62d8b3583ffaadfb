package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/signing/attached"
)

// signatureReport is what inspect says of an image's signatures.
type signatureReport struct {
	// Tag is where containers/image keeps them (sha256-<hex>.sig).
	Tag string `json:"tag"`
	// Signatures are the sigstore signatures found there.
	Signatures []attached.Signature `json:"signatures"`
	// Keys says, for each --public-key, whether a signature by it
	// verifies (as a node's policy would check it).
	Keys []attached.KeyResult `json:"keys,omitempty"`
}

// inspectSignatures lists image's sigstore signatures and verifies them
// with each key file.
func inspectSignatures(ctx context.Context, rc registry.Client, kc authn.Keychain, image string, keyFiles []string) (*signatureReport, error) {
	reg := attached.Registry{Keychain: kc, Insecure: rc.Insecure}
	// Loopback registries are spoken to in plain HTTP, as by the rest of
	// inspect (go-containerregistry's rule).
	if ref, err := name.ParseReference(image); err == nil && ref.Context().Scheme() == "http" {
		reg.Insecure = append(reg.Insecure, ref.Context().RegistryStr())
	}
	tag, sigs, err := attached.List(ctx, image, reg)
	if err != nil {
		return nil, err
	}
	rep := &signatureReport{Tag: tag, Signatures: sigs}
	if len(keyFiles) == 0 {
		return rep, nil
	}
	keys := make([][]byte, 0, len(keyFiles))
	for _, f := range keyFiles {
		k, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--public-key: %w", err)
		}
		keys = append(keys, k)
	}
	if rep.Keys, err = attached.VerifyEach(ctx, image, keys, reg); err != nil {
		return nil, err
	}
	return rep, nil
}

func printSignatures(out io.Writer, s *signatureReport) {
	if s == nil {
		return
	}
	fmt.Fprintf(out, "\nSignatures (%d, sigstore attachments at %s):\n", len(s.Signatures), s.Tag)
	for _, a := range s.Signatures {
		fmt.Fprintf(out, "  %s\n", a.Digest)
	}
	for _, k := range s.Keys {
		if k.Verified {
			fmt.Fprintf(out, "  key %s: verified\n", k.Fingerprint)
		} else {
			fmt.Fprintf(out, "  key %s: NOT verified: %s\n", k.Fingerprint, k.Reason)
		}
	}
}
