package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/sigpolicy"
	"github.com/strata-dev/strata/test/testregistry"
)

type fixedKeychain struct{ a authn.Authenticator }

func (k fixedKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

// Issue 24 point 6: inspect lists the image's sigstore signatures and
// says for each --public-key whether a signature by it verifies.
func TestInspectShowsSignatures(t *testing.T) {
	reg := testregistry.Start(t, inspectPassword)
	image := reg.Push(t, "os/signed:1", testregistry.Busybox(t))
	signer, err := signing.GenerateKeyPair([]byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := signing.GenerateKeyPair([]byte("q"))
	if err != nil {
		t.Fatal(err)
	}
	if err := signing.Sign(context.Background(), image, signer.Private, signing.Registry{Keychain: fixedKeychain{reg.Auth()}, Insecure: []string{reg.Host}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := func(name string, k []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, k, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	auth := authFile(t, reg, inspectPassword)
	out, err := runInspect(t, image, "--registry-config", auth, "-o", "json",
		"--public-key", keyFile("signer.pub", signer.Public), "--public-key", keyFile("other.pub", other.Public))
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	var got inspection
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	s := got.Signatures
	signerFP, _ := sigpolicy.Fingerprint(signer.Public)
	otherFP, _ := sigpolicy.Fingerprint(other.Public)
	if s == nil || len(s.Signatures) != 1 || !strings.HasSuffix(s.Tag, ".sig") || len(s.Keys) != 2 ||
		s.Keys[0].Fingerprint != signerFP || !s.Keys[0].Verified || s.Keys[1].Fingerprint != otherFP || s.Keys[1].Verified {
		t.Fatalf("signatures %+v, want one signature, verified by %s and not by %s", s, signerFP, otherFP)
	}

	text, err := runInspect(t, image, "--registry-config", auth, "--public-key", keyFile("other2.pub", other.Public))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "Signatures (1, sigstore attachments at ") || !strings.Contains(text, "key "+otherFP+": NOT verified") {
		t.Fatalf("text output:\n%s", text)
	}
	hand, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, map[string]string{"etc/hand": "x\n"}))
	if err != nil {
		t.Fatal(err)
	}
	unsigned := reg.Push(t, "os/signed:hand", hand)
	text, err = runInspect(t, unsigned, "--registry-config", auth)
	if err != nil || !strings.Contains(text, "Signatures (0,") {
		t.Fatalf("unsigned image: %v\n%s", err, text)
	}
}
