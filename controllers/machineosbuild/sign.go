package machineosbuild

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/status"
	"github.com/strata-dev/strata/signing"
)

// signImage signs the succeeded build's image with the MachineOSConfig's
// signing key (spec.signing), once: with imageApproval Required only after
// ImageApproved=True, so that a signature means "approved". It sets the
// build's ImageSigned condition, which the rollout waits for. A key that
// is not usable, or whose public key nodes would not trust, is a False
// condition naming the field; a registry that did not answer is retried.
// The key's bytes go to containers/image only: never to a log, an event
// or the status.
func (r *Reconciler) signImage(ctx context.Context, s *scope) error {
	sg, b := s.mosc.Spec.Signing, s.build
	if sg == nil || !IsTrue(s.buildBefore, v1alpha1.BuildSucceeded) {
		// A succeeded build is signed once its success is written.
		return nil
	}
	if s.mosc.Spec.ImageApproval == v1alpha1.ImageApprovalRequired && !meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildImageApproved) {
		return nil
	}
	ns, name := r.Config.Namespace, sg.KeySecret.Name
	field := "spec.signing.keySecret.name"
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			setSigned(b, false, v1alpha1.ReasonSigningFailed, fmt.Sprintf("%s: Secret %s/%s not found", field, ns, name))
			return nil
		}
		return err
	}
	key, err := signing.KeyFromSecret(secret.Data)
	if err != nil {
		setSigned(b, false, v1alpha1.ReasonSigningFailed, fmt.Sprintf("%s: Secret %s/%s: %v", field, ns, name, err))
		return nil
	}
	fp := key.Fingerprint
	if !signing.Trusts(pemKeys(sg.PublicKeys), fp) {
		setSigned(b, false, v1alpha1.ReasonSigningFailed, fmt.Sprintf("%s: the public key of Secret %s/%s (%s) is not one of spec.signing.publicKeys: nodes would refuse what it signs", field, ns, name, fp))
		return nil
	}
	if meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildImageSigned) && slices.ContainsFunc(b.Status.Signatures, func(x v1alpha1.ImageSignature) bool { return x.KeyFingerprint == fp }) {
		return nil
	}
	image := b.Status.DigestedImagePushSpec
	reg := signing.Registry{Keychain: s.pushKC, Insecure: r.Registry.Insecure}
	if err := signing.Sign(ctx, image, key.Private, reg); err != nil {
		var ke *signing.KeyError
		if errors.As(err, &ke) {
			setSigned(b, false, v1alpha1.ReasonSigningFailed, fmt.Sprintf("%s: Secret %s/%s: %v", field, ns, name, err))
			return nil
		}
		// An attachment over the bounds stays so: retrying cannot help.
		var over *signing.AttachmentError
		if errors.As(err, &over) {
			setSigned(b, false, v1alpha1.ReasonSigningFailed, fmt.Sprintf("%s: %v", field, err))
			return nil
		}
		setSigned(b, false, v1alpha1.ReasonSigningFailed, "Signing "+image+" failed, retrying: "+registry.Explain(err).Error())
		return fmt.Errorf("build %s: sign %s: %w", b.Name, image, err)
	}
	// The signature must verify with the key nodes are given: a
	// cosign.pub of another key would make every node refuse the image.
	if err := signing.Verify(ctx, image, [][]byte{key.Public}, reg); err != nil {
		var refused *signing.RefusedError
		if errors.As(err, &refused) {
			setSigned(b, false, v1alpha1.ReasonSigningFailed, fmt.Sprintf("%s: Secret %s/%s: %s is not the public key of %s: %v", field, ns, name, signing.SecretPublicKeyData, signing.SecretKeyData, err))
			return nil
		}
		return fmt.Errorf("build %s: verify the signature of %s: %w", b.Name, image, err)
	}
	if !slices.ContainsFunc(b.Status.Signatures, func(x v1alpha1.ImageSignature) bool { return x.KeyFingerprint == fp }) {
		b.Status.Signatures = append(b.Status.Signatures, v1alpha1.ImageSignature{KeyFingerprint: fp})
	}
	msg := fmt.Sprintf("Signed %s with the key of Secret %s/%s (%s)", image, ns, name, fp)
	setSigned(b, true, v1alpha1.ReasonSigned, msg)
	s.afterWrite(func() {
		r.Recorder.Eventf(b, s.mosc, corev1.EventTypeNormal, v1alpha1.ReasonSigned, "Sign", "%s", status.Truncate(msg, 1024))
	})
	return nil
}

// pemKeys are keys as the PEM bytes the signing package takes.
func pemKeys(keys []v1alpha1.PEMPublicKey) [][]byte {
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		out = append(out, []byte(k))
	}
	return out
}

// setSigned sets the build's ImageSigned condition, the signing step's
// own (the build's other conditions are setBuildConditions').
func setSigned(b *v1alpha1.MachineOSBuild, ok bool, reason, msg string) {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: v1alpha1.BuildImageSigned, Status: st, Reason: reason,
		Message: status.Truncate(msg, 4096), ObservedGeneration: b.Generation,
	})
}

// signingIdentity is the fingerprint of the signing key's public key
// (cosign.pub of spec.signing.keySecret), recorded in the provenance; ""
// when the pool does not sign or the Secret cannot be read yet (signImage
// reports that).
func (r *Reconciler) signingIdentity(ctx context.Context, s *scope) string {
	sg := s.mosc.Spec.Signing
	if sg == nil {
		return ""
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Config.Namespace, Name: sg.KeySecret.Name}, secret); err != nil {
		return ""
	}
	fp, err := signing.Fingerprint(secret.Data[signing.SecretPublicKeyData])
	if err != nil {
		return ""
	}
	return fp
}
