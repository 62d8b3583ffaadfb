package signing_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/signing/attached"
	"github.com/strata-dev/strata/test/testregistry"
)

// TestAttachedAgreesWithContainersImage holds package attached's pure-Go
// verification (what stratactl inspect reports) to containers/image's
// (what nodes enforce): for each image and key, both accept or both
// refuse. The cases are the ways a signature can be wrong: none, another
// key, the right key over another repository's identity, tampered bytes.
func TestAttachedAgreesWithContainersImage(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "secret")
	r := registryOf(reg)
	ar := attached.Registry{Keychain: r.Keychain, Insecure: r.Insecure}
	kp, other := keyPair(t), keyPair(t)
	keys := [][]byte{kp.Public, other.Public}

	signed := reg.Push(t, "os/worker:latest", testregistry.Busybox(t))
	if err := signing.Sign(ctx, signed, kp.Private, r); err != nil {
		t.Fatalf("sign: %v", err)
	}
	unsigned := reg.Push(t, "os/worker:hand", mutate.ConfigMediaType(testregistry.Busybox(t), "application/vnd.oci.image.config.v1+json"))
	// The same image and its attachment copied to another repository:
	// the signature names os/worker, not os/copy.
	copied := copyWithSignatures(t, reg, signed, "os/copy")
	tampered := reg.Push(t, "os/tampered:latest", mutate.ConfigMediaType(testregistry.Busybox(t), "application/vnd.oci.image.config.v1+json"))
	if err := signing.Sign(ctx, tampered, kp.Private, r); err != nil {
		t.Fatalf("sign: %v", err)
	}
	reg.TamperSignatures(t, tampered)

	cases := []struct {
		name, image string
		want        []bool // per key: kp, other
	}{
		{"signed", signed, []bool{true, false}},
		{"unsigned", unsigned, []bool{false, false}},
		{"another repository", copied, []bool{false, false}},
		{"tampered", tampered, []bool{false, false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := attached.VerifyEach(ctx, c.image, keys, ar)
			if err != nil {
				t.Fatalf("attached.VerifyEach: %v", err)
			}
			for i, k := range keys {
				err := signing.Verify(ctx, c.image, [][]byte{k}, r)
				var refused *signing.RefusedError
				if err != nil && !errors.As(err, &refused) {
					t.Fatalf("signing.Verify: %v", err)
				}
				if ci := err == nil; ci != c.want[i] || res[i].Verified != c.want[i] {
					t.Errorf("key %d: containers/image accepts=%v (%v), attached accepts=%v (%s), want %v", i, ci, err, res[i].Verified, res[i].Reason, c.want[i])
				}
				if !res[i].Verified && res[i].Reason == "" {
					t.Errorf("key %d: refused without a reason", i)
				}
			}
		})
	}
}

// copyWithSignatures copies image (repo@sha256:...) and its signature
// attachment into repo, and returns the copy's reference.
func copyWithSignatures(t *testing.T, reg *testregistry.Registry, image, repo string) string {
	t.Helper()
	auth := remote.WithAuth(reg.Auth())
	src, err := name.NewDigest(image)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(src, auth)
	if err != nil {
		t.Fatal(err)
	}
	dst := reg.Host + "/" + repo + "@" + src.DigestStr()
	d, err := name.NewDigest(dst, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(d, img, auth); err != nil {
		t.Fatal(err)
	}
	sig, err := remote.Image(testregistry.SignatureTag(t, image), auth)
	if err != nil {
		t.Fatal(err)
	}
	st, err := name.NewTag(reg.Host+"/"+repo+":"+strings.Replace(src.DigestStr(), ":", "-", 1)+".sig", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(st, sig, auth); err != nil {
		t.Fatal(err)
	}
	return dst
}
