package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/sigpolicy"
	"github.com/strata-dev/strata/test/testregistry"
)

type regKeychain struct{ a authn.Authenticator }

func (k regKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

// Issue 24 point 2 on the simulator: a node whose pool signs its images
// gets the signature policy in its /etc before its first switch and
// switches with --enforce-container-sigpolicy. An image pushed by hand
// under the pool's repository is refused: the node reports Degraded with
// the reason and keeps its image, nothing is staged and no drain is
// asked for. A signed image then rolls out. A tampered signature is
// refused the same way.
func TestSignaturePolicyOnTheSimulator(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	r := signing.Registry{Keychain: regKeychain{reg.Auth()}, Insecure: []string{reg.Host}}
	key, err := signing.GenerateKeyPair([]byte("pass"))
	if err != nil {
		t.Fatal(err)
	}
	push := func(tag string) string {
		img, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, map[string]string{"etc/strata-sim-test": tag + "\n"}))
		if err != nil {
			t.Fatal(err)
		}
		return reg.Push(t, "strata/os:"+tag, img)
	}
	base, byHand, signed, tampered := push("base"), push("hand"), push("signed"), push("tampered")
	for _, img := range []string{signed, tampered} {
		if err := signing.Sign(ctx, img, key.Private, r); err != nil {
			t.Fatal(err)
		}
	}
	reg.TamperSignatures(t, tampered)

	rg := newRig(t)
	rg.bootSimulator(base)
	// The daemon reads bootc's options as on a node (the simulated
	// bootc 1.16 has --enforce-container-sigpolicy).
	rg.lock = rg.sim
	rg.restart()
	pol, err := json.Marshal(v1alpha1.NodeSignaturePolicy{Repository: reg.Host + "/strata/os", PublicKeys: []string{string(key.Public)}})
	if err != nil {
		t.Fatal(err)
	}
	rg.annotate(map[string]*string{v1alpha1.ImageSignaturePolicyAnnotation: str(string(pol))})
	config := rg.varConfig("one")

	for _, img := range []string{byHand, tampered} {
		rg.desire(img, config)
		rg.converge()
		n := rg.node()
		reason := n.Annotations[v1alpha1.ReasonAnnotation]
		if n.Annotations[v1alpha1.StateAnnotation] != v1alpha1.NodeStateDegraded || !strings.Contains(reason, "refused by the signature policy") {
			t.Fatalf("desired %s: state %q reason %q, want Degraded and refused by the signature policy", img, n.Annotations[v1alpha1.StateAnnotation], reason)
		}
		t.Logf("refused: %s", reason)
		if staged, booted := rg.sim.entries(); staged != "" || booted != bootc.DigestOf(base) {
			t.Fatalf("after the refusal staged %q booted %q, want nothing staged and %s booted", staged, booted, bootc.DigestOf(base))
		}
		if got := rg.drains(); len(got) != 0 {
			t.Fatalf("drains %v for a refused image", got)
		}
	}
	// The policy is on the node, byte for byte what the image will carry.
	files, err := sigpolicy.NodePolicy(reg.Host+"/strata/os", [][]byte{key.Public})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := rg.root.ReadFile(f.Path)
		if err != nil || string(got) != string(f.Data) {
			t.Fatalf("%s on the node: %q, %v; want the policy's bytes", filepath.Clean(f.Path), got, err)
		}
	}

	rg.desire(signed, config)
	rg.converge()
	rg.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
		v1alpha1.CurrentImageAnnotation: signed,
	})

	// A key rotation (README): both keys trusted, then only the new one.
	// Images signed by the new key roll out with no refusal at either
	// step.
	newKey, err := signing.GenerateKeyPair([]byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	for i, keys := range [][]string{{string(key.Public), string(newKey.Public)}, {string(newKey.Public)}} {
		img := push(fmt.Sprintf("rotated-%d", i))
		if err := signing.Sign(ctx, img, newKey.Private, r); err != nil {
			t.Fatal(err)
		}
		pol, err := json.Marshal(v1alpha1.NodeSignaturePolicy{Repository: reg.Host + "/strata/os", PublicKeys: keys})
		if err != nil {
			t.Fatal(err)
		}
		rg.annotate(map[string]*string{v1alpha1.ImageSignaturePolicyAnnotation: str(string(pol))})
		rg.desire(img, config)
		rg.converge()
		rg.expectAnnotations(map[string]string{
			v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
			v1alpha1.CurrentImageAnnotation: img,
		})
	}
}

// refusedBySignature tells a refusal (retrying cannot help: the node is
// Degraded) from a failure to fetch (retried).
func TestRefusedBySignature(t *testing.T) {
	for msg, want := range map[string]bool{
		"bootc switch: exit status 1: error: Switching: Pulling: Creating importer: failed to invoke method OpenImage: A signature was required, but no signature exists": true,
		"... Source image rejected: None of the signatures were accepted, reasons: x; y":                                                                                  true,
		"... cryptographic signature verification failed: invalid signature when validating ASN.1 encoded signature":                                                      true,
		"error: containers-policy.json specifies a default of `insecureAcceptAnything`; refusing usage":                                                                   true,
		"bootc switch: exit status 1: error: Pulling: reading manifest: dial tcp 10.0.0.1:443: connect: connection refused":                                               false,
		"bootc switch: timed out after 1h0m0s": false,
	} {
		if got := refusedBySignature(errors.New(msg)); got != want {
			t.Errorf("refusedBySignature(%q) = %v, want %v", msg, got, want)
		}
	}
	if !refusedBySignature(fmt.Errorf("stage: %w", errNoEnforcement)) {
		t.Error("a bootc that cannot enforce is not a refusal")
	}
}
