package build

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/signing"
)

// verifyBase checks that the resolved base (spec resolved to base, by
// digest) is signed by a key of spec.baseImageVerification before
// anything is built on it. A base that is not is refused by name: the
// MachineOSConfig is Degraded (BaseImageNotVerified) naming the field
// and the digest, status.baseImage keeps the base pinned before (a tag
// moved to an unsigned image does not replace it), and nothing new is
// built until the base verifies (checked again on the resolve
// interval, or at once with the resolve annotation). A registry that does not answer is
// BaseUnreachable, retried.
func (r *Reconciler) verifyBase(ctx context.Context, s *scope, spec, base, fieldName string, kc authn.Keychain) bool {
	var keys [][]byte
	for _, k := range s.mosc.Spec.BaseImageVerification.PublicKeys {
		keys = append(keys, []byte(k))
	}
	err := signing.Verify(ctx, base, keys, signing.Registry{Keychain: kc, Insecure: r.Registry.Insecure})
	var refused *signing.RefusedError
	switch {
	case err == nil:
		return true
	case errors.As(err, &refused):
		msg := fmt.Sprintf("%s: base image %s resolved to %s, which is not signed by a key of spec.baseImageVerification.publicKeys: %v", fieldName, spec, base, refused.Err)
		if p := s.mosc.Status.BaseImage; p != nil && p.PullSpec == spec {
			msg += "; the pinned base " + p.DigestedPullSpec + " is kept"
		}
		s.problem = &problem{v1alpha1.ReasonBaseImageNotVerified, msg}
		// Checked again on the resolve interval: a signature may come.
		s.requeue(r.Config.BaseResolveInterval.Duration)
		return false
	default:
		s.problem = &problem{v1alpha1.ReasonBaseUnreachable, fmt.Sprintf("%s: verify the signature of %s: %v", fieldName, base, registry.Explain(err))}
		return false
	}
}
