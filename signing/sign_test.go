package signing_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/test/testregistry"
)

// keyPair makes a key pair; scrypt makes this take a moment.
func keyPair(t *testing.T) *signing.KeyPair {
	t.Helper()
	kp, err := signing.GenerateKeyPair([]byte("test passphrase"))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

type keychain struct{ a authn.Authenticator }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

func registryOf(r *testregistry.Registry) signing.Registry {
	return signing.Registry{Keychain: keychain{r.Auth()}, Insecure: []string{r.Host}}
}

// sigTag is where containers/image keeps image's sigstore signatures.
func sigTag(t *testing.T, image string) name.Tag {
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

// The whole cycle against a real registry (distribution) with a login:
// what Strata signs, a node's keys accept; an unsigned image, another
// key's signature and a tampered signature are refused, each as a
// RefusedError.
func TestSignAndVerify(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "secret")
	r := registryOf(reg)
	kp, other := keyPair(t), keyPair(t)

	signed := reg.Push(t, "os/worker:latest", testregistry.Busybox(t))
	if err := signing.Sign(ctx, signed, kp.Private, r); err != nil {
		t.Fatalf("sign: %v", err)
	}
	if err := signing.Verify(ctx, signed, [][]byte{kp.Public}, r); err != nil {
		t.Fatalf("verify the signed image: %v", err)
	}
	// The signature is the attachment containers/image (so bootc) reads.
	if _, err := remote.Head(sigTag(t, signed), remote.WithAuth(reg.Auth())); err != nil {
		t.Fatalf("no sigstore attachment %s: %v", sigTag(t, signed), err)
	}
	// A rotation: both keys are trusted, the image is signed by one.
	if err := signing.Verify(ctx, signed, [][]byte{other.Public, kp.Public}, r); err != nil {
		t.Fatalf("verify with two keys: %v", err)
	}

	unsigned := reg.Push(t, "os/worker:hand", mutate.ConfigMediaType(testregistry.Busybox(t), "application/vnd.oci.image.config.v1+json"))
	refused(t, "unsigned", signing.Verify(ctx, unsigned, [][]byte{kp.Public}, r))
	refused(t, "another key", signing.Verify(ctx, signed, [][]byte{other.Public}, r))

	// Tampered: the signature's bytes changed in the attachment.
	tag := sigTag(t, signed)
	att, err := remote.Image(tag, remote.WithAuth(reg.Auth()))
	if err != nil {
		t.Fatal(err)
	}
	m, err := att.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	const sigAnnotation = "dev.cosignproject.cosign/signature"
	orig, err := base64.StdEncoding.DecodeString(m.Layers[0].Annotations[sigAnnotation])
	if err != nil || len(orig) == 0 {
		t.Fatalf("signature annotation %q: %v", m.Layers[0].Annotations[sigAnnotation], err)
	}
	orig[len(orig)/2] ^= 0xff
	layers, err := att.Layers()
	if err != nil {
		t.Fatal(err)
	}
	tampered, err := mutate.ConfigFile(mutate.MediaType(emptyOCI(), m.MediaType), mustConfig(t, att))
	if err != nil {
		t.Fatal(err)
	}
	ann := map[string]string{}
	for k, v := range m.Layers[0].Annotations {
		ann[k] = v
	}
	ann[sigAnnotation] = base64.StdEncoding.EncodeToString(orig)
	tampered, err = mutate.Append(tampered, mutate.Addendum{Layer: layers[0], MediaType: m.Layers[0].MediaType, Annotations: ann})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, tampered, remote.WithAuth(reg.Auth())); err != nil {
		t.Fatal(err)
	}
	refused(t, "tampered", signing.Verify(ctx, signed, [][]byte{kp.Public}, r))

	// Signing again appends and keeps what was there: the good signature
	// verifies next to the tampered one (any valid signature suffices).
	if err := signing.Sign(ctx, signed, kp.Private, r); err != nil {
		t.Fatalf("sign again: %v", err)
	}
	if err := signing.Verify(ctx, signed, [][]byte{kp.Public}, r); err != nil {
		t.Fatalf("verify after signing again: %v", err)
	}
}

func refused(t *testing.T, what string, err error) {
	t.Helper()
	var re *signing.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("%s: got %v, want a RefusedError", what, err)
	}
	t.Logf("%s: %v", what, err)
}

func mustConfig(t *testing.T, img v1.Image) *v1.ConfigFile {
	t.Helper()
	c, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWrongPassphraseIsNamedNotLeaked(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	kp := keyPair(t)
	img := reg.Push(t, "os/worker:latest", testregistry.Busybox(t))
	key := kp.Private
	key.Passphrase = []byte("wrong")
	err := signing.Sign(ctx, img, key, registryOf(reg))
	if err == nil {
		t.Fatal("signed with a wrong passphrase")
	}
	if strings.Contains(err.Error(), string(kp.Private.PEM[40:80])) {
		t.Fatalf("the error carries the key: %v", err)
	}
	t.Log(err)
}
