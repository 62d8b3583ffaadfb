package bootcsim_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/sigpolicy"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/bootcsim/sigverify"
	"github.com/strata-dev/strata/test/testregistry"
)

type staticKeychain struct{ a authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

// writePolicy writes the files Strata's daemon writes into the node's
// /etc: the policy for repo trusting keys.
func writePolicy(t *testing.T, s *bootcsim.Sim, repo string, keys ...[]byte) {
	t.Helper()
	files, err := sigpolicy.NodePolicy(repo, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		mustWrite(t, filepath.Join(s.Root, f.Path), string(f.Data))
	}
}

// With --enforce-container-sigpolicy the simulator's switch evaluates
// the node's own policy.json and registries.d with containers/image, as
// bootc does: a signed image stages; an unsigned one, one signed by
// another key and one whose signature was tampered with are refused with
// containers/image's reason and nothing is staged; a policy that accepts
// anything by default is refused as bootc refuses it; two trusted keys
// (a rotation) accept either. Without the option nothing is verified.
func TestSwitchEnforcesTheNodesSignaturePolicy(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "s3cret")
	r := signing.Registry{Keychain: staticKeychain{reg.Auth()}, Insecure: []string{reg.Host}}
	key, other := genKey(t), genKey(t)
	sign := func(img testImage, k *signing.KeyPair) {
		t.Helper()
		if err := signing.Sign(ctx, img.Ref, k.Private, r); err != nil {
			t.Fatalf("sign %s: %v", img.Ref, err)
		}
	}
	base := pushImage(t, reg, "strata/os:base", "0", map[string]string{"etc/hello": "base\n"})
	signed := pushImage(t, reg, "strata/os:signed", "1", map[string]string{"etc/hello": "signed\n"})
	sign(signed, key)
	unsigned := pushImage(t, reg, "strata/os:hand", "2", map[string]string{"etc/hello": "pushed by hand\n"})
	byOther := pushImage(t, reg, "strata/os:other", "3", map[string]string{"etc/hello": "other key\n"})
	sign(byOther, other)
	tampered := pushImage(t, reg, "strata/os:tampered", "4", map[string]string{"etc/hello": "tampered\n"})
	sign(tampered, key)
	reg.TamperSignatures(t, tampered.Ref)

	s, _ := newNode(t)
	s.VerifySignatures = sigverify.Verify
	mustWrite(t, filepath.Join(s.Root, "run", "ostree", "auth.json"), string(reg.DockerConfigJSON(reg.Password)))
	if err := s.Init(ctx, base.Ref); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(s.Root, "etc", "ostree", "auth.json"), string(reg.DockerConfigJSON(reg.Password)))
	repo := reg.Host + "/strata/os"
	enforce := bootcsim.SwitchOptions{EnforceSigPolicy: true}

	// The base's own policy (none): bootc cannot enforce.
	if _, err := s.Switch(ctx, signed.Ref, enforce); err == nil || !strings.Contains(err.Error(), "policy.json") {
		t.Fatalf("switch without a policy = %v, want an error naming policy.json", err)
	}
	mustWrite(t, filepath.Join(s.Root, "etc", "containers", "policy.json"), `{"default":[{"type":"insecureAcceptAnything"}]}`)
	if _, err := s.Switch(ctx, signed.Ref, enforce); err == nil || !strings.Contains(err.Error(), "insecureAcceptAnything") {
		t.Fatalf("switch with an accept-anything policy = %v, want bootc's refusal", err)
	}

	writePolicy(t, s, repo, key.Public)
	for _, tc := range []struct {
		name string
		img  testImage
		want string
	}{
		{"unsigned", unsigned, "A signature was required, but no signature exists"},
		{"another key", byOther, "cryptographic signature verification failed"},
		{"tampered", tampered, "cryptographic signature verification failed"},
	} {
		_, err := s.Switch(ctx, tc.img.Ref, enforce)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: switch = %v, want a refusal containing %q", tc.name, err, tc.want)
		}
		t.Logf("%s: %v", tc.name, err)
		expectEntries(t, status(t, s), "", base.Digest, "", false)
	}
	if _, err := s.Switch(ctx, signed.Ref, enforce); err != nil {
		t.Fatalf("switch to the signed image: %v", err)
	}
	expectEntries(t, status(t, s), signed.Digest, base.Digest, "", false)

	// A rotation: both keys trusted; the image signed by the other key
	// now passes.
	writePolicy(t, s, repo, key.Public, other.Public)
	if _, err := s.Switch(ctx, byOther.Ref, enforce); err != nil {
		t.Fatalf("switch during a rotation: %v", err)
	}
	expectEntries(t, status(t, s), byOther.Digest, base.Digest, "", false)

	// Without the option, bootc (and the simulator) trusts.
	if _, err := s.Switch(ctx, unsigned.Ref, bootcsim.SwitchOptions{}); err != nil {
		t.Fatalf("switch without enforcement: %v", err)
	}
}

func genKey(t *testing.T) *signing.KeyPair {
	t.Helper()
	kp, err := signing.GenerateKeyPair([]byte("passphrase"))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// Issue 37 finding 3, as bootc does it: a download-only switch with
// --enforce-container-sigpolicy verifies before it downloads (an
// unsigned image is refused, nothing is staged); the verified stage is
// reported with the reference's signature "containerPolicy", an
// unverified one without. A switch with the option to the image staged
// without it is a new spec (the signature verification is part of it)
// and verifies, where bootc would otherwise say "unchanged" and keep
// the unverified stage; --from-downloaded verifies nothing; an upgrade
// of a verified spec verifies again.
func TestDownloadOnlySwitchEnforcesThePolicy(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	r := signing.Registry{Keychain: staticKeychain{reg.Auth()}, Insecure: []string{reg.Host}}
	key := genKey(t)
	base := pushImage(t, reg, "strata/os:base", "0", map[string]string{"etc/hello": "base\n"})
	signed := pushImage(t, reg, "strata/os:signed", "1", map[string]string{"etc/hello": "signed\n"})
	if err := signing.Sign(ctx, signed.Ref, key.Private, r); err != nil {
		t.Fatal(err)
	}
	unsigned := pushImage(t, reg, "strata/os:hand", "2", map[string]string{"etc/hello": "pushed by hand\n"})

	s, _ := newNode(t)
	s.VerifySignatures = sigverify.Verify
	if err := s.Init(ctx, base.Ref); err != nil {
		t.Fatal(err)
	}
	if err := s.SetBootcVersion(bootcsim.VersionMain); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(s.Root, "etc", "ostree", "auth.json"), string(reg.DockerConfigJSON(reg.Password)))
	writePolicy(t, s, reg.Host+"/strata/os", key.Public)
	locked := bootcsim.SwitchOptions{DownloadOnly: true, EnforceSigPolicy: true}
	signature := func() string {
		t.Helper()
		st := status(t, s).Status.Staged
		if st == nil || st.Image == nil {
			return "(nothing staged)"
		}
		return string(st.Image.Image.Signature)
	}

	if _, err := s.Switch(ctx, unsigned.Ref, locked); err == nil || !strings.Contains(err.Error(), "A signature was required, but no signature exists") {
		t.Fatalf("download-only switch to an unsigned image = %v, want the policy's refusal", err)
	}
	expectEntries(t, status(t, s), "", base.Digest, "", false)

	if _, err := s.Switch(ctx, signed.Ref, locked); err != nil {
		t.Fatalf("download-only switch to the signed image: %v", err)
	}
	if got := signature(); got != `"containerPolicy"` {
		t.Fatalf("verified stage: signature %s, want \"containerPolicy\"", got)
	}
	if !status(t, s).Status.Staged.DownloadOnly {
		t.Fatal("the verified stage is not locked")
	}

	// Staged ahead without the policy (an older daemon): reported as
	// unverified, and a switch with the option verifies and refuses it.
	if _, err := s.Switch(ctx, unsigned.Ref, bootcsim.SwitchOptions{DownloadOnly: true}); err != nil {
		t.Fatal(err)
	}
	if got := signature(); got != "" {
		t.Fatalf("unverified stage: signature %s, want none", got)
	}
	changed, err := s.Switch(ctx, unsigned.Ref, locked)
	if err == nil || changed || !strings.Contains(err.Error(), "A signature was required") {
		t.Fatalf("enforcing switch to the image staged unverified = %v, %v; want it verified and refused", changed, err)
	}
	// --from-downloaded only unlocks: it would boot the unverified stage.
	if err := s.Upgrade(ctx, bootcsim.UpgradeOptions{FromDownloaded: true}); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s).Status.Staged; got == nil || got.DownloadOnly || got.Image.ImageDigest != unsigned.Digest {
		t.Fatalf("after --from-downloaded staged %+v, want %s unlocked", got, unsigned.Digest)
	}

	// An upgrade of a verified spec fetches under the policy again.
	if _, err := s.Switch(ctx, signed.Ref, bootcsim.SwitchOptions{EnforceSigPolicy: true}); err != nil {
		t.Fatal(err)
	}
	writePolicy(t, s, reg.Host+"/strata/os", genKey(t).Public)
	if err := s.Upgrade(ctx, bootcsim.UpgradeOptions{DownloadOnly: true}); err == nil || !strings.Contains(err.Error(), "cryptographic signature verification failed") {
		t.Fatalf("upgrade of a verified spec under a policy its signature fails = %v, want the refusal", err)
	}
}
