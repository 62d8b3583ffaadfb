package signing

import (
	"go.podman.io/image/v5/signature/sigstore"
)

// PrivateKey is a sigstore private key as cosign and skopeo write it
// (PEM "ENCRYPTED SIGSTORE PRIVATE KEY" or "ENCRYPTED COSIGN PRIVATE
// KEY") and its passphrase.
type PrivateKey struct {
	PEM        []byte
	Passphrase []byte
}

// KeyPair is a generated key pair.
type KeyPair struct {
	Private PrivateKey
	Public  []byte
}

// GenerateKeyPair makes a new sigstore key pair protected by passphrase,
// in the form `skopeo generate-sigstore-key` writes.
func GenerateKeyPair(passphrase []byte) (*KeyPair, error) {
	r, err := sigstore.GenerateKeyPair(passphrase)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Private: PrivateKey{PEM: r.PrivateKey, Passphrase: passphrase}, Public: r.PublicKey}, nil
}
