package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/sigpolicy"
	"github.com/strata-dev/strata/test/bootcsim"
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

// RefusedBySignature tells a refusal (retrying cannot help: the node is
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
		if got := RefusedBySignature(errors.New(msg)); got != want {
			t.Errorf("RefusedBySignature(%q) = %v, want %v", msg, got, want)
		}
	}
	if !RefusedBySignature(fmt.Errorf("stage: %w", errNoEnforcement)) {
		t.Error("a bootc that cannot enforce is not a refusal")
	}
}

// signedRig is a simulated node on bootc main (switch --download-only)
// whose pool signs: it runs base, Done, with the policy annotation, and
// counts its downloads from then on. sign signs an image with the
// pool's key.
func signedRig(t *testing.T, tags ...string) (rg *rig, base string, imgs map[string]string, sign func(string), log *pullLog, config string) {
	t.Helper()
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
	sign = func(img string) {
		t.Helper()
		if err := signing.Sign(ctx, img, key.Private, r); err != nil {
			t.Fatal(err)
		}
	}
	base = push("base")
	imgs = map[string]string{}
	for _, tag := range tags {
		imgs[tag] = push(tag)
	}
	rg = newRig(t)
	rg.bootSimulator(base)
	if err := rg.sim.sim.SetBootcVersion(bootcsim.VersionMain); err != nil {
		t.Fatal(err)
	}
	rg.lock = rg.sim
	rg.restart()
	pol, err := json.Marshal(v1alpha1.NodeSignaturePolicy{Repository: reg.Host + "/strata/os", PublicKeys: []string{string(key.Public)}})
	if err != nil {
		t.Fatal(err)
	}
	rg.annotate(map[string]*string{v1alpha1.ImageSignaturePolicyAnnotation: str(string(pol))})
	config = rg.varConfig("one")
	rg.desire(base, config)
	rg.converge()
	log = &pullLog{}
	rg.sim.sim.Out = log
	return rg, base, imgs, sign, log, config
}

// expectRefusedAtTurn: at its turn the node refuses image (Degraded,
// refused by the signature policy), keeps base booted and boots
// nothing else, and asks for no drain.
func (r *rig) expectRefusedAtTurn(image, config, base string) {
	r.t.Helper()
	r.desire(image, config)
	r.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: nil})
	r.converge()
	n := r.node()
	if reason := n.Annotations[v1alpha1.ReasonAnnotation]; n.Annotations[v1alpha1.StateAnnotation] != v1alpha1.NodeStateDegraded || !strings.Contains(reason, "refused by the signature policy") {
		r.t.Fatalf("the turn of unsigned %s: state %q reason %q, want Degraded, refused by the signature policy", image, n.Annotations[v1alpha1.StateAnnotation], reason)
	}
	r.reboot() // whatever reboots the node next
	if _, booted := r.sim.entries(); booted != bootc.DigestOf(base) {
		r.t.Fatalf("booted %s after the refusal, want %s", booted, bootc.DigestOf(base))
	}
	if d := r.drains(); len(d) != 0 {
		r.t.Fatalf("drains %v for a refused image", d)
	}
}

// Issue 37 finding 3: where the pool signs, staging ahead writes the
// policy and switches --download-only with --enforce-container-sigpolicy.
// An unsigned image asked for ahead is refused and not downloaded (nor
// tried again at every sync), and refused again at its turn. A signed
// one is staged ahead, verified, and at its turn boots with no second
// download.
func TestStageAheadEnforcesTheSignaturePolicy(t *testing.T) {
	rg, base, imgs, sign, log, config := signedRig(t, "hand", "signed")
	sign(imgs["signed"])

	rg.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: str(imgs["hand"])})
	rg.sync()
	switches := rg.sim.counts().switches
	rg.sync()
	if staged, _ := rg.sim.entries(); staged != "" {
		t.Fatalf("staged %s ahead: an unsigned image", staged)
	}
	if got := log.pulls(imgs["hand"]); got != 0 {
		t.Fatalf("%d downloads of the unsigned image, want none", got)
	}
	if got := rg.sim.counts().switches; got != switches {
		t.Fatalf("%d switches after the refusal, want %d: a refused stage ahead is not tried at every sync", got, switches)
	}
	if v := rg.ann(v1alpha1.StagedImageAnnotation); v != "" {
		t.Fatalf("stagedImage %q for a refused image", v)
	}
	rg.expectRefusedAtTurn(imgs["hand"], config, base)

	rg.desire(base, config)
	rg.converge()
	rg.stageAhead(imgs["signed"], log, 1)
	if st, err := rg.sim.Status(rg.ctx); err != nil || !st.Status.Staged.Verified() {
		t.Fatalf("staged ahead %+v, %v: want it verified by bootc", st.Status.Staged, err)
	}
	rg.turn(imgs["signed"], config)
	if got := log.pulls(imgs["signed"]); got != 1 {
		t.Errorf("%d downloads of the signed image, want the one ahead", got)
	}
}

// Issue 37 finding 3: an image staged ahead without the policy (by a
// daemon before this fix, or before the pool signed) is only unlocked at
// the node's turn, and --from-downloaded verifies nothing: the daemon
// stages it again, enforcing the policy, which refuses it. Before the
// fix the node booted it.
func TestUnverifiedStageAheadIsVerifiedAtTheTurn(t *testing.T) {
	rg, base, imgs, _, _, config := signedRig(t, "hand")
	if _, err := rg.sim.sim.Switch(rg.ctx, imgs["hand"], bootcsim.SwitchOptions{DownloadOnly: true}); err != nil {
		t.Fatal(err)
	}
	rg.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: str(imgs["hand"])})
	rg.sync()
	if v := rg.ann(v1alpha1.StagedImageAnnotation); v != "" {
		t.Errorf("stagedImage %q for an image nobody verified", v)
	}
	rg.expectRefusedAtTurn(imgs["hand"], config, base)
}

// Where the pool signs, a bootc that cannot verify a download-only
// switch does not stage ahead, and says why.
func TestStageAheadPossible(t *testing.T) {
	full := &bootc.Capabilities{SwitchDownloadOnly: true, UpgradeDownloadOnly: true, EnforceSigPolicy: true}
	noEnforce := &bootc.Capabilities{SwitchDownloadOnly: true, UpgradeDownloadOnly: true}
	v116 := &bootc.Capabilities{UpgradeDownloadOnly: true, EnforceSigPolicy: true}
	for _, tc := range []struct {
		name  string
		caps  *bootc.Capabilities
		signs bool
		ok    bool
		why   string
	}{
		{"main, signs", full, true, true, ""},
		{"main, no signing", noEnforce, false, true, ""},
		{"no enforcement, signs", noEnforce, true, false, "cannot verify a download-only switch"},
		{"1.16", v116, true, false, "cannot stage locked"},
		{"no lock", nil, false, false, "cannot stage locked"},
	} {
		ok, why := stageAheadPossible(tc.caps, tc.signs)
		if ok != tc.ok || !strings.Contains(why, tc.why) || (tc.ok && why != "") {
			t.Errorf("%s: %v %q, want %v and a reason containing %q", tc.name, ok, why, tc.ok, tc.why)
		}
	}
}

// Issue 37 finding 3, the rollback path: where the pool signs, the
// daemon rolls an unhealthy update back only to the image the node ran
// before it. A rollback deployment put there since (here by hand: a
// switch to an unsigned image, a reboot into it and a rollback from it)
// would boot unverified: the update fails instead, without `bootc
// rollback`. Before the fix the node booted the unsigned image. The
// same update without the tampering rolls back to the image before it.
func TestRollbackOnlyToThePreviousImage(t *testing.T) {
	for _, tamper := range []bool{false, true} {
		t.Run(fmt.Sprintf("tampered=%v", tamper), func(t *testing.T) {
			rg, base, imgs, sign, _, config := signedRig(t, "signed", "hand")
			sign(imgs["signed"])
			rg.desire(imgs["signed"], config)
			rg.sync()
			rg.applyDrain()
			if !rg.sync().Rebooting {
				t.Fatal("no reboot")
			}
			if err := rg.sim.sim.FailBoot(imgs["signed"]); err != nil {
				t.Fatal(err)
			}
			rg.reboot()
			rg.sync() // verifying, unhealthy, within the timeout
			if tamper {
				s := rg.sim.sim
				if _, err := s.Switch(rg.ctx, imgs["hand"], bootcsim.SwitchOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := s.Reboot(rg.ctx); err != nil {
					t.Fatal(err)
				}
				if err := s.Rollback(rg.ctx); err != nil {
					t.Fatal(err)
				}
				if err := s.Reboot(rg.ctx); err != nil {
					t.Fatal(err)
				}
				rg.restart()
				st, err := rg.sim.Status(rg.ctx)
				if err != nil {
					t.Fatal(err)
				}
				if st.Status.Booted.Digest() != bootc.DigestOf(imgs["signed"]) || st.Status.Rollback.Digest() != bootc.DigestOf(imgs["hand"]) {
					t.Fatalf("tampering: booted %s rollback %s", st.Status.Booted.Digest(), st.Status.Rollback.Digest())
				}
			}
			rg.clock = rg.clock.Add(time.Hour)
			rg.converge()
			_, booted := rg.sim.entries()
			reason := rg.ann(v1alpha1.ReasonAnnotation)
			if rg.ann(v1alpha1.StateAnnotation) != v1alpha1.NodeStateDegraded {
				t.Fatalf("state %q reason %q, want Degraded", rg.ann(v1alpha1.StateAnnotation), reason)
			}
			if !tamper {
				if booted != bootc.DigestOf(base) || rg.sim.counts().rollbacks != 1 {
					t.Fatalf("booted %s after %d rollbacks, want %s after one", booted, rg.sim.counts().rollbacks, bootc.DigestOf(base))
				}
				return
			}
			if booted != bootc.DigestOf(imgs["signed"]) || rg.sim.counts().rollbacks != 0 {
				t.Fatalf("booted %s after %d rollbacks by the daemon, want %s and none", booted, rg.sim.counts().rollbacks, bootc.DigestOf(imgs["signed"]))
			}
			if !strings.Contains(reason, "not rolled back") || !strings.Contains(reason, bootc.DigestOf(imgs["hand"])) {
				t.Fatalf("reason %q, want it to say why the node was not rolled back to %s", reason, imgs["hand"])
			}
		})
	}
}
