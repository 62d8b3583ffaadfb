package attached

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigstoresig "github.com/sigstore/sigstore/pkg/signature"
	"go.podman.io/image/v5/docker/reference"

	"github.com/strata-dev/strata/sigpolicy"
)

// KeyResult says whether an image has a valid signature by one key.
type KeyResult struct {
	// Fingerprint names the key (sigpolicy.Fingerprint).
	Fingerprint string
	// Verified is true when a signature by this key verifies.
	Verified bool
	// Reason says why not, when not.
	Reason string
}

// VerifyEach verifies image (repo@sha256:...) with each key on its own:
// which of the keys signed it. A key accepts the image when one of its
// signatures verifies with the key, its payload names the image's
// manifest digest, and its identity is the image's repository (as
// containers/image's sigstoreSigned with matchRepository). A registry
// error is returned; a refusal, an attachment over the bounds included,
// is a result.
func VerifyEach(ctx context.Context, image string, keys [][]byte, reg Registry) ([]KeyResult, error) {
	res := make([]KeyResult, 0, len(keys))
	verifiers := make([]sigstoresig.Verifier, 0, len(keys))
	for i, k := range keys {
		fp, err := sigpolicy.Fingerprint(k)
		if err != nil {
			return nil, fmt.Errorf("public key [%d]: %w", i, err)
		}
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("public key [%d]: %w", i, err)
		}
		v, err := sigstoresig.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return nil, fmt.Errorf("public key [%d]: %w", i, err)
		}
		res = append(res, KeyResult{Fingerprint: fp})
		verifiers = append(verifiers, v)
	}
	want, err := parseImage(image)
	if err != nil {
		return nil, err
	}
	sigs, err := readSignatures(ctx, image, reg)
	var over *AttachmentError
	switch {
	case errors.As(err, &over):
		for i := range res {
			res[i].Reason = err.Error()
		}
		return res, nil
	case err != nil:
		return nil, err
	}
	for i, v := range verifiers {
		if len(sigs) == 0 {
			res[i].Reason = "a signature was required, but no signature exists"
			continue
		}
		var reasons []string
		for _, s := range sigs {
			err := s.acceptedBy(v, want)
			if err == nil {
				res[i].Verified, reasons = true, nil
				break
			}
			reasons = append(reasons, err.Error())
		}
		res[i].Reason = strings.Join(reasons, "; ")
	}
	return res, nil
}

// wantedImage is what a signature must name.
type wantedImage struct {
	repository string // normalised, as policy.json scopes it
	digest     string
}

func parseImage(image string) (wantedImage, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return wantedImage{}, fmt.Errorf("image %q: %w", image, err)
	}
	c, ok := named.(reference.Canonical)
	if !ok {
		return wantedImage{}, fmt.Errorf("image %q is not a reference by digest", image)
	}
	return wantedImage{repository: c.Name(), digest: c.Digest().String()}, nil
}

// signature is one signature layer: its payload and its base64
// signature annotation ("" when it has none).
type signature struct {
	payload []byte
	base64  string
}

// readSignatures reads image's signature layers, after Check's bounds.
func readSignatures(ctx context.Context, image string, reg Registry) ([]signature, error) {
	a, err := readManifest(ctx, image, reg)
	if err != nil || a.body == nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(a.body))
	if err != nil {
		return nil, fmt.Errorf("parse the signature attachment %s of %s: %w", a.tag, image, err)
	}
	var sigs []signature
	for _, l := range m.Layers {
		if l.MediaType != SignatureMediaType {
			continue
		}
		payload, err := a.client.blob(ctx, l.Digest, MaxBytes)
		if err != nil {
			return nil, fmt.Errorf("read the signature attachment %s of %s: %w", a.tag, image, err)
		}
		sigs = append(sigs, signature{payload: payload, base64: l.Annotations[signatureAnnotation]})
	}
	return sigs, nil
}

// acceptedBy says why v does not accept s for want; nil when it does.
// The order is containers/image's: the signature, then the payload's
// digest, then its identity.
func (s signature) acceptedBy(v sigstoresig.Verifier, want wantedImage) error {
	if s.base64 == "" {
		return fmt.Errorf("missing %s annotation", signatureAnnotation)
	}
	raw, err := base64.StdEncoding.DecodeString(s.base64)
	if err != nil {
		return fmt.Errorf("base64 decoding: %w", err)
	}
	if err := v.VerifySignature(bytes.NewReader(raw), bytes.NewReader(s.payload)); err != nil {
		return fmt.Errorf("cryptographic signature verification failed: %w", err)
	}
	p, err := parsePayload(s.payload)
	if err != nil {
		return err
	}
	if p.digest != want.digest {
		return fmt.Errorf("signature for digest %s does not match", p.digest)
	}
	signed, err := reference.ParseNormalizedNamed(p.reference)
	if err != nil || signed.Name() != want.repository {
		return fmt.Errorf("signature for identity %q is not accepted", p.reference)
	}
	return nil
}

// sigstoreSignatureType is the payload's critical.type.
const sigstoreSignatureType = "cosign container image signature"

type payload struct {
	digest    string
	reference string
}

// parsePayload parses a simple-signing payload as strictly as
// containers/image does: exactly the critical fields, of the right
// types. (It does not refuse duplicate keys, which containers/image
// does; a payload is only parsed after its signature verified.)
func parsePayload(b []byte) (payload, error) {
	var top struct {
		Critical json.RawMessage `json:"critical"`
		Optional json.RawMessage `json:"optional"`
	}
	if err := exactFields(b, &top, "critical", "optional"); err != nil {
		return payload{}, err
	}
	if o := bytes.TrimSpace(top.Optional); !bytes.Equal(o, []byte("null")) {
		var m map[string]any
		if err := json.Unmarshal(o, &m); err != nil {
			return payload{}, fmt.Errorf("invalid signature payload: optional: %w", err)
		}
	}
	var critical struct {
		Type     string          `json:"type"`
		Image    json.RawMessage `json:"image"`
		Identity json.RawMessage `json:"identity"`
	}
	if err := exactFields(top.Critical, &critical, "type", "image", "identity"); err != nil {
		return payload{}, err
	}
	if critical.Type != sigstoreSignatureType {
		return payload{}, fmt.Errorf("unrecognized signature type %s", critical.Type)
	}
	var img struct {
		Digest string `json:"docker-manifest-digest"`
	}
	if err := exactFields(critical.Image, &img, "docker-manifest-digest"); err != nil {
		return payload{}, err
	}
	if _, err := v1.NewHash(img.Digest); err != nil {
		return payload{}, fmt.Errorf("invalid docker-manifest-digest value %q: %w", img.Digest, err)
	}
	var id struct {
		Reference string `json:"docker-reference"`
	}
	if err := exactFields(critical.Identity, &id, "docker-reference"); err != nil {
		return payload{}, err
	}
	return payload{digest: img.Digest, reference: id.Reference}, nil
}

// exactFields decodes the JSON object b into v, refusing an object
// whose keys are not exactly fields.
func exactFields(b []byte, v any, fields ...string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("invalid signature payload: %w", err)
	}
	got := slices.Sorted(maps.Keys(m))
	if !slices.Equal(got, slices.Sorted(slices.Values(fields))) {
		return fmt.Errorf("invalid signature payload: fields %v, want %v", got, fields)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("invalid signature payload: %w", err)
	}
	return nil
}
