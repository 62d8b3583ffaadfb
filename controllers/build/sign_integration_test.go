package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/provenance"
	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/sigpolicy"
)

// signingSecret creates the Secret spec.signing.keySecret names, in
// cosign's layout, and returns the key pair.
func (f *fixture) signingSecret(name string) *signing.KeyPair {
	f.t.Helper()
	kp, err := signing.GenerateKeyPair([]byte("pass-" + name))
	if err != nil {
		f.t.Fatal(err)
	}
	f.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string][]byte{
			signing.SecretKeyData:        kp.Private.PEM,
			signing.SecretPassphraseData: kp.Private.Passphrase,
			signing.SecretPublicKeyData:  kp.Public,
		},
	})
	return kp
}

func signWith(secret string, keys ...[]byte) func(*v1alpha1.MachineOSConfig) {
	return func(m *v1alpha1.MachineOSConfig) {
		m.Spec.Signing = &v1alpha1.ImageSigning{KeySecret: v1alpha1.LocalObjectReference{Name: secret}}
		for _, k := range keys {
			m.Spec.Signing.PublicKeys = append(m.Spec.Signing.PublicKeys, v1alpha1.PEMPublicKey(k))
		}
	}
}

func (f *fixture) signingRegistry() signing.Registry {
	return signing.Registry{Keychain: f.keychain(), Insecure: []string{f.reg.Host}}
}

// noKeyLeaks checks that neither the build's status nor any Event holds
// the private key or its passphrase.
func noKeyLeaks(t *testing.T, b *v1alpha1.MachineOSBuild, kp *signing.KeyPair) {
	t.Helper()
	st, err := json.Marshal(b.Status)
	if err != nil {
		t.Fatal(err)
	}
	var events eventsv1.EventList
	if err := env.Client.List(context.Background(), &events); err != nil {
		t.Fatal(err)
	}
	texts := []string{string(st)}
	for _, e := range events.Items {
		texts = append(texts, e.Note)
	}
	keyLine := strings.Split(strings.TrimSpace(string(kp.Private.PEM)), "\n")[1]
	for _, s := range texts {
		if strings.Contains(s, keyLine) || strings.Contains(s, string(kp.Private.Passphrase)) || strings.Contains(s, "PRIVATE KEY") {
			t.Fatalf("the signing key shows in %q", s)
		}
	}
}

// Issue 24 point 1: a MachineOSConfig with spec.signing gets every image
// signed as a sigstore attachment that verifies with its public key; the
// build says so (ImageSigned, the key's fingerprint), and the key shows
// nowhere.
func TestImagesAreSigned(t *testing.T) {
	f := newFixture(t, "signed")
	kp := f.signingSecret("signed-key")
	startController(t, f.reg, 0)
	f.mosc(configLayer, noContainerfile, signWith("signed-key", kp.Public))

	b := waitCondition(t, waitNewBuild(t, "signed").Name, v1alpha1.BuildImageSigned)
	fp, err := sigpolicy.Fingerprint(kp.Public)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Status.Signatures) != 1 || b.Status.Signatures[0].KeyFingerprint != fp {
		t.Fatalf("signatures %+v, want one by %s", b.Status.Signatures, fp)
	}
	if err := signing.Verify(context.Background(), b.Status.DigestedImagePushSpec, [][]byte{kp.Public}, f.signingRegistry()); err != nil {
		t.Fatalf("the published image does not verify: %v", err)
	}
	noKeyLeaks(t, b, kp)
	// The provenance records the signing identity.
	var prov []byte
	for _, r := range f.listReferrers(b.Status.DigestedImagePushSpec) {
		if r.ArtifactType == provenance.ArtifactType {
			if prov, err = f.referrers().Read(context.Background(), b.Status.DigestedImagePushSpec, r, f.keychain()); err != nil {
				t.Fatal(err)
			}
		}
	}
	var st provenance.Statement
	if err := json.Unmarshal(prov, &st); err != nil {
		t.Fatalf("provenance %q: %v", prov, err)
	}
	if got := st.Predicate.BuildDefinition.InternalParameters.SigningKey; got != fp {
		t.Errorf("the provenance's signingKey is %q, want %s", got, fp)
	}
	// The image carries the policy its nodes verify with, byte for byte
	// what the daemon writes before the switch.
	files, err := sigpolicy.NodePolicy(f.reg.Host+"/strata/signed", [][]byte{kp.Public})
	if err != nil {
		t.Fatal(err)
	}
	for _, pf := range files {
		if got := f.topLayerFile(b.Status.DigestedImagePushSpec, pf.Path); got != string(pf.Data) {
			t.Errorf("%s in the configuration layer = %q, want %q", pf.Path, got, pf.Data)
		}
	}
}

// With imageApproval Required, a signature means "approved": nothing is
// signed before ImageApproved=True.
func TestSignedOnlyOnceApproved(t *testing.T) {
	f := newFixture(t, "approved")
	kp := f.signingSecret("approved-key")
	startController(t, f.reg, 0)
	f.mosc(configLayer, noContainerfile, signWith("approved-key", kp.Public), func(m *v1alpha1.MachineOSConfig) {
		m.Spec.ImageApproval = v1alpha1.ImageApprovalRequired
	})
	b := waitCondition(t, waitNewBuild(t, "approved").Name, v1alpha1.BuildSucceeded)
	// Succeeded is written in the reconcile that pushed; the next ones
	// see the build succeeded and unapproved. Bring one more reconcile
	// (the signing Secret touched), then check nothing was signed.
	n := reconciles(t, machineosbuild.ControllerName)
	touchSecret(t, "approved-key")
	eventually(t, "another reconcile", func() error {
		if reconciles(t, machineosbuild.ControllerName) <= n {
			return errors.New("none yet")
		}
		return nil
	})
	var refused *signing.RefusedError
	if err := signing.Verify(context.Background(), b.Status.DigestedImagePushSpec, [][]byte{kp.Public}, f.signingRegistry()); !errors.As(err, &refused) {
		t.Fatalf("before the approval the image verifies (%v): it was signed unapproved", err)
	}
	b, err := getBuild(b.Name)
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildImageSigned); c != nil {
		t.Fatalf("ImageSigned %+v before the approval", c)
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildImageApproved, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApproved, Message: "scan clean"})
	if err := env.Client.Status().Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	b = waitCondition(t, b.Name, v1alpha1.BuildImageSigned)
	if err := signing.Verify(context.Background(), b.Status.DigestedImagePushSpec, [][]byte{kp.Public}, f.signingRegistry()); err != nil {
		t.Fatalf("approved and signed, the image does not verify: %v", err)
	}
}

// A signing key whose public key nodes do not trust signs nothing: the
// condition names the field and the key's fingerprint.
func TestUntrustedSigningKeyIsNamed(t *testing.T) {
	f := newFixture(t, "untrusted")
	kp := f.signingSecret("untrusted-key")
	other, err := signing.GenerateKeyPair([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	startController(t, f.reg, 0)
	f.mosc(configLayer, noContainerfile, signWith("untrusted-key", other.Public))
	name := waitNewBuild(t, "untrusted").Name
	fp, _ := sigpolicy.Fingerprint(kp.Public)
	eventually(t, "ImageSigned=False naming the key", func() error {
		b, err := getBuild(name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildImageSigned)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "spec.signing.keySecret.name") || !strings.Contains(c.Message, fp) {
			return fmt.Errorf("ImageSigned %+v", c)
		}
		return nil
	})
}

// pinnedOf is tag's image by digest, repo@sha256:....
func (f *fixture) pinnedOf(tag string) string {
	f.t.Helper()
	ref, err := name.ParseReference(tag, name.Insecure)
	if err != nil {
		f.t.Fatal(err)
	}
	return ref.Context().Name() + "@" + f.digestOf(tag)
}

// Issue 24 point 4: with spec.baseImageVerification the base is built on
// only when signed by one of the keys. The base tag moved to an image
// nobody signed is refused by name (the field, the tag, the digest), the
// pinned base is kept, and nothing new is built.
func TestMovedBaseWithoutSignatureIsRefused(t *testing.T) {
	f := newFixture(t, "vbase")
	kp, err := signing.GenerateKeyPair([]byte("base"))
	if err != nil {
		t.Fatal(err)
	}
	if err := signing.Sign(context.Background(), f.pinnedOf(f.base), kp.Private, f.signingRegistry()); err != nil {
		t.Fatal(err)
	}
	startController(t, f.reg, 0)
	f.mosc(configLayer, noContainerfile, func(m *v1alpha1.MachineOSConfig) {
		m.Spec.BaseImageVerification = &v1alpha1.BaseImageVerification{PublicKeys: []v1alpha1.PEMPublicKey{v1alpha1.PEMPublicKey(kp.Public)}}
	})
	a := waitCondition(t, waitNewBuild(t, "vbase").Name, v1alpha1.BuildSucceeded)
	pinned := getMOSC(t, "vbase").Status.BaseImage.DigestedPullSpec

	f.push("strata/base:1") // the tag moves to an unsigned image
	moved := f.pinnedOf(f.base)
	annotate(t, "vbase", v1alpha1.ResolveBaseAnnotation)
	if c := meta.FindStatusCondition(getMOSC(t, "vbase").Status.Conditions, v1alpha1.ConfigBaseImageVerified); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("BaseImageVerified %+v for the signed base", c)
	}
	eventually(t, "BaseImageVerified=False naming the field and the moved base", func() error {
		m := getMOSC(t, "vbase")
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConfigBaseImageVerified)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonBaseImageNotVerified || !strings.Contains(c.Message, "spec.baseImagePullSpec") ||
			!strings.Contains(c.Message, moved) || !strings.Contains(c.Message, "the pinned base "+pinned+" is kept") {
			return fmt.Errorf("BaseImageVerified %+v", c)
		}
		return nil
	})
	// It lasts: later reconciles (a Secret touched) keep the verdict and
	// the pinned base.
	before := reconciles(t, "build")
	touchSecret(t, "vbase-pull")
	eventually(t, "a reconcile after the Secret change", func() error {
		if reconciles(t, "build") <= before {
			return errors.New("no reconcile yet")
		}
		return nil
	})
	if c := meta.FindStatusCondition(getMOSC(t, "vbase").Status.Conditions, v1alpha1.ConfigBaseImageVerified); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("BaseImageVerified %+v after another reconcile, want still False", c)
	}
	m := getMOSC(t, "vbase")
	if m.Status.BaseImage.DigestedPullSpec != pinned || m.Status.MachineOSBuild.Name != a.Name {
		t.Fatalf("after the refusal: base %s, build %s; want %s and %s kept", m.Status.BaseImage.DigestedPullSpec, m.Status.MachineOSBuild.Name, pinned, a.Name)
	}
}

// touchSecret changes a Secret's labels: the MachineOSConfigs that name
// it are reconciled.
func touchSecret(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Labels = map[string]string{"touched": time.Now().Format("150405.000000")}
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
}
