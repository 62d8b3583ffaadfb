package signing

import (
	"fmt"

	"github.com/strata-dev/strata/sigpolicy"
)

// The keys of a signing Secret: cosign's names, so that `cosign
// generate-key-pair k8s://strata-system/NAME` makes one.
const (
	SecretKeyData        = "cosign.key"
	SecretPassphraseData = "cosign.password"
	SecretPublicKeyData  = "cosign.pub"
)

// SecretKey is the signing key a Secret holds, with its public key and
// that key's fingerprint (sigpolicy.Fingerprint), the signing identity.
type SecretKey struct {
	Private     PrivateKey
	Public      []byte
	Fingerprint string
}

// KeyFromSecret reads a signing key from a Secret's data. Its errors name
// the key of the Secret that is missing or wrong, never its content.
func KeyFromSecret(data map[string][]byte) (SecretKey, error) {
	for _, k := range []string{SecretKeyData, SecretPassphraseData, SecretPublicKeyData} {
		if _, ok := data[k]; !ok {
			return SecretKey{}, fmt.Errorf("has no %s key (want %s, %s and %s)", k, SecretKeyData, SecretPassphraseData, SecretPublicKeyData)
		}
	}
	fp, err := sigpolicy.Fingerprint(data[SecretPublicKeyData])
	if err != nil {
		return SecretKey{}, fmt.Errorf("%s: %w", SecretPublicKeyData, err)
	}
	return SecretKey{
		Private:     PrivateKey{PEM: data[SecretKeyData], Passphrase: data[SecretPassphraseData]},
		Public:      data[SecretPublicKeyData],
		Fingerprint: fp,
	}, nil
}

// Fingerprint names a public key (PEM) as sigpolicy.Fingerprint does.
func Fingerprint(publicKeyPEM []byte) (string, error) {
	return sigpolicy.Fingerprint(publicKeyPEM)
}

// Trusts says whether keys (PEM public keys) hold the key named fp.
func Trusts(keys [][]byte, fp string) bool {
	for _, k := range keys {
		if got, err := sigpolicy.Fingerprint(k); err == nil && got == fp {
			return true
		}
	}
	return false
}
