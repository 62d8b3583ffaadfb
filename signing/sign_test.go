package signing_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
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
	if _, err := remote.Head(testregistry.SignatureTag(t, signed), remote.WithAuth(reg.Auth())); err != nil {
		t.Fatalf("no sigstore attachment %s: %v", testregistry.SignatureTag(t, signed), err)
	}
	// A rotation: both keys are trusted, the image is signed by one.
	if err := signing.Verify(ctx, signed, [][]byte{other.Public, kp.Public}, r); err != nil {
		t.Fatalf("verify with two keys: %v", err)
	}

	unsigned := reg.Push(t, "os/worker:hand", mutate.ConfigMediaType(testregistry.Busybox(t), "application/vnd.oci.image.config.v1+json"))
	refused(t, "unsigned", signing.Verify(ctx, unsigned, [][]byte{kp.Public}, r))
	refused(t, "another key", signing.Verify(ctx, signed, [][]byte{other.Public}, r))

	// Tampered: the signature's bytes changed in the attachment.
	reg.TamperSignatures(t, signed)
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
