package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/hostfs"
	"github.com/strata-dev/strata/sigpolicy"
)

// ensureSignaturePolicy writes the signature policy the node's
// imageSignaturePolicy annotation carries (WriteSignaturePolicy) into
// the host's /etc before a switch, so that bootc verifies even the
// first image Strata gives the node. It says whether the switch must
// enforce the policy.
func (d *Daemon) ensureSignaturePolicy(s *scope) (bool, error) {
	raw := s.annotation(v1alpha1.ImageSignaturePolicyAnnotation)
	if raw == "" {
		return false, nil
	}
	var p v1alpha1.NodeSignaturePolicy
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return false, fmt.Errorf("annotation %s: %w", v1alpha1.ImageSignaturePolicyAnnotation, err)
	}
	written, err := WriteSignaturePolicy(d.Root, p)
	if err != nil {
		return false, fmt.Errorf("annotation %s: %w", v1alpha1.ImageSignaturePolicyAnnotation, err)
	}
	for _, f := range written {
		s.log.Info("Wrote the signature policy", "path", f)
	}
	return true, nil
}

// WriteSignaturePolicy writes p's files (sigpolicy.MergeNodePolicy)
// under root: policy.json merged into the one the host has, so that the
// base image's own requirements keep applying to podman and CRI-O, the
// registries.d entry and the keys. A file already equal is not written
// again: the same bytes are in the image's configuration layer, so the
// node's /etc holds no local modification once the image boots. A host
// policy.json that is not one is an error: nothing is written, and
// nothing may be switched to. It returns the paths written.
func WriteSignaturePolicy(root *hostfs.Root, p v1alpha1.NodeSignaturePolicy) ([]string, error) {
	keys := make([][]byte, 0, len(p.PublicKeys))
	for _, k := range p.PublicKeys {
		keys = append(keys, []byte(k))
	}
	base, err := root.ReadFile(sigpolicy.PolicyPath)
	if errors.Is(err, fs.ErrNotExist) {
		base, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the node's signature policy: %w", err)
	}
	files, err := sigpolicy.MergeNodePolicy(base, p.Repository, keys)
	if err != nil {
		return nil, err
	}
	var written []string
	for _, f := range files {
		if old, err := root.ReadFile(f.Path); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := root.WriteFile(f.Path, f.Data, 0o644, 0, 0); err != nil {
			return written, fmt.Errorf("write the signature policy: %w", err)
		}
		written = append(written, f.Path)
	}
	return written, nil
}

// stageAheadPossible says whether the node may stage ahead, and why
// not: only where bootc's switch stages locked in one step
// (--download-only) and, where the pool signs, also takes
// --enforce-container-sigpolicy in that step. bootc verifies only when
// it fetches; at the node's turn a stage ahead is only unlocked
// (--from-downloaded fetches nothing), so an image staged ahead
// unverified would boot unverified.
func stageAheadPossible(caps *bootc.Capabilities, signs bool) (bool, string) {
	switch {
	case caps == nil || !caps.LockedStaging():
		return false, "this bootc cannot stage locked (switch --download-only)"
	case signs && !caps.EnforceSigPolicy:
		return false, "the pool signs its images and this bootc cannot verify a download-only switch (switch --enforce-container-sigpolicy)"
	}
	return true, ""
}

// switchEnforced switches with --enforce-container-sigpolicy, staged
// locked where bootc can (as switchLocked). A bootc without the option
// cannot verify, so the daemon refuses to switch rather than boot an
// image nobody verified.
func (d *Daemon) switchEnforced(ctx context.Context, image string, caps *bootc.Capabilities) (bool, error) {
	if caps == nil || !caps.EnforceSigPolicy {
		return false, errNoEnforcement
	}
	o := bootc.SwitchOptions{EnforceSigPolicy: true}
	if caps.LockedStaging() {
		o.DownloadOnly = true
		return true, d.Lock.SwitchWith(ctx, image, o)
	}
	if err := d.Lock.SwitchWith(ctx, image, o); err != nil {
		return false, err
	}
	if caps.UpgradeDownloadOnly {
		return true, d.Lock.LockStaged(ctx)
	}
	return false, nil
}

// errNoEnforcement: the pool's images must be verified, and this node's
// bootc cannot.
var errNoEnforcement = errors.New("bootc on this node has no switch --enforce-container-sigpolicy: it cannot verify the image's signature, so the image is not switched to")

// signatureRefusals are what containers/image says when its policy
// refuses an image (signature/policy_eval*.go), and bootc's refusal of a
// policy that accepts anything: bootc passes them on in its error.
var signatureRefusals = []string{
	"A signature was required, but no signature exists",
	"None of the signatures were accepted",
	"cryptographic signature verification failed",
	"is rejected by policy",
	"Signature for identity",
	"Signature for digest",
	"No signature verification policy found",
	"specifies a default of `insecureAcceptAnything`",
}

// RefusedBySignature says whether a switch failed because the image did
// not pass the signature policy: retrying cannot help.
func RefusedBySignature(err error) bool {
	if errors.Is(err, errNoEnforcement) {
		return true
	}
	msg := err.Error()
	for _, r := range signatureRefusals {
		if strings.Contains(msg, r) {
			return true
		}
	}
	return false
}

// refuseUnsigned records the desired update as failed: the node keeps
// its image and reports Degraded with bootc's reason, which counts
// toward the pool's maxFailedNodes and so halts the rollout.
func (d *Daemon) refuseUnsigned(s *scope, image string, cause error) error {
	config := s.annotation(v1alpha1.DesiredConfigAnnotation)
	reason := fmt.Sprintf("image %s refused by the signature policy: %v", image, cause)
	s.rec.Update = &UpdateRecord{Key: UpdateKey(image, config), Image: image, Config: config, Phase: PhaseFailed, Reason: reason}
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return err
	}
	s.log.Info("The desired image was refused by the signature policy", "error", cause.Error())
	d.event(s, corev1.EventTypeWarning, "SignatureRefused", "Switch", "%s", reason)
	return nil
}
