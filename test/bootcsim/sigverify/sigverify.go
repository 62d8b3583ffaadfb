// Package sigverify evaluates the simulator's signature policy checks
// with containers/image (package signing), as bootc's fetch does. It is
// apart from package bootcsim so that the bootc-sim binary does not link
// containers/image: bootc-sim runs the bootc-sim-sigpolicy helper, which
// links this package, for a switch with --enforce-container-sigpolicy.
package sigverify

import (
	"context"

	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/test/bootcsim"
)

// Verify is a bootcsim.SignatureVerifier: the image passes the policy,
// or the error says why not.
func Verify(ctx context.Context, c bootcsim.PolicyCheck) error {
	return signing.VerifyPolicy(ctx, c.Image, c.Policy, signing.Registry{
		Keychain: c.Keychain, Insecure: c.Insecure, RegistriesDir: c.RegistriesDir,
	})
}

var _ bootcsim.SignatureVerifier = Verify
