package build

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/status"
	"github.com/strata-dev/strata/signing"
)

// verifyBase checks, when spec.baseImageVerification is set, that the
// base just resolved (spec to base, by digest) is signed by one of its
// keys before anything is built on it, and records the verdict in the
// MachineOSConfig's BaseImageVerified condition, which lasts until the
// next resolve. A base that is not signed is refused by name (the field,
// the tag and the digest): with a base pinned before, the caller keeps
// building on that one (a tag moved to an unsigned image does not replace
// it); without one, nothing is built (Degraded, BaseImageNotVerified). A
// registry that does not answer is BaseUnreachable, retried.
func (r *Reconciler) verifyBase(ctx context.Context, s *scope, spec, base, fieldName string, kc authn.Keychain) bool {
	mosc := s.mosc
	v := mosc.Spec.BaseImageVerification
	if v == nil {
		meta.RemoveStatusCondition(&mosc.Status.Conditions, v1alpha1.ConfigBaseImageVerified)
		return true
	}
	keys := make([][]byte, 0, len(v.PublicKeys))
	for _, k := range v.PublicKeys {
		keys = append(keys, []byte(k))
	}
	err := signing.Verify(ctx, base, keys, signing.Registry{Keychain: kc, Insecure: r.Registry.Insecure})
	var refused *signing.RefusedError
	switch {
	case err == nil:
		setBaseVerified(mosc, true, v1alpha1.ReasonBaseImageVerified, fmt.Sprintf("%s: base image %s (%s) is signed by a key of spec.baseImageVerification.publicKeys", fieldName, spec, base))
		return true
	case errors.As(err, &refused):
		msg := fmt.Sprintf("%s: base image %s resolved to %s, which is not signed by a key of spec.baseImageVerification.publicKeys: %v", fieldName, spec, base, refused.Err)
		if p := mosc.Status.BaseImage; p != nil && p.PullSpec == spec {
			msg += "; the pinned base " + p.DigestedPullSpec + " is kept"
		} else {
			s.problem = &problem{v1alpha1.ReasonBaseImageNotVerified, msg}
		}
		setBaseVerified(mosc, false, v1alpha1.ReasonBaseImageNotVerified, msg)
		// Checked again on the resolve interval: a signature may come.
		s.requeue(r.Config.BaseResolveInterval.Duration)
		return false
	default:
		s.problem = &problem{v1alpha1.ReasonBaseUnreachable, fmt.Sprintf("%s: verify the signature of %s: %v", fieldName, base, registry.Explain(err))}
		return false
	}
}

func setBaseVerified(mosc *v1alpha1.MachineOSConfig, ok bool, reason, msg string) {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&mosc.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConfigBaseImageVerified, Status: st, Reason: reason,
		Message: status.Truncate(msg, 4096), ObservedGeneration: mosc.Generation,
	})
}
