package testregistry

import (
	"encoding/base64"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// SignatureTag is where containers/image keeps the sigstore signatures
// of image (host/repo@sha256:…): the tag sha256-<hex>.sig.
func SignatureTag(t testing.TB, image string) name.Tag {
	t.Helper()
	d, err := name.NewDigest(image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(d.Context().Name()+":"+strings.Replace(d.DigestStr(), ":", "-", 1)+".sig", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// TamperSignatures flips a byte in the middle of every sigstore signature
// of image, in place: the attachment stays well formed, only the
// signatures no longer verify, as after an attacker's edit.
func (r *Registry) TamperSignatures(t testing.TB, image string) {
	t.Helper()
	const sigAnnotation = "dev.cosignproject.cosign/signature"
	tag := SignatureTag(t, image)
	att, err := remote.Image(tag, remote.WithAuth(r.Auth()))
	if err != nil {
		t.Fatalf("read the signatures of %s: %v", image, err)
	}
	m, err := att.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := att.Layers()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := att.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	out, err := mutate.ConfigFile(mutate.MediaType(empty.Image, m.MediaType), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range m.Layers {
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[sigAnnotation])
		if err != nil || len(sig) == 0 {
			t.Fatalf("signature %d of %s: annotation %q: %v", i, image, l.Annotations[sigAnnotation], err)
		}
		sig[len(sig)/2] ^= 0xff
		ann := maps.Clone(l.Annotations)
		ann[sigAnnotation] = base64.StdEncoding.EncodeToString(sig)
		if out, err = mutate.Append(out, mutate.Addendum{Layer: layers[i], MediaType: l.MediaType, Annotations: ann}); err != nil {
			t.Fatal(err)
		}
	}
	if err := remote.Write(tag, out, remote.WithAuth(r.Auth())); err != nil {
		t.Fatalf("write the tampered signatures of %s: %v", image, err)
	}
}
