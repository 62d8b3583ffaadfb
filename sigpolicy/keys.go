package sigpolicy

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// Fingerprint names a public key: "SHA256:" and the hex SHA-256 of its
// DER SubjectPublicKeyInfo, so that the same key in any PEM layout has
// one name. It is the signing identity provenance records.
func Fingerprint(publicKeyPEM []byte) (string, error) {
	der, err := publicKeyDER(publicKeyPEM)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return "SHA256:" + hex.EncodeToString(sum[:]), nil
}

// publicKeyDER checks that p is exactly one PEM public key of a kind
// sigstore signs with and returns its DER bytes.
func publicKeyDER(p []byte) ([]byte, error) {
	block, rest := pem.Decode(p)
	if block == nil {
		return nil, errors.New("not a PEM public key")
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("PEM block %q, want PUBLIC KEY", block.Type)
	}
	if extra, _ := pem.Decode(rest); extra != nil {
		return nil, errors.New("more than one PEM block: give each key on its own")
	}
	if _, err := x509.ParsePKIXPublicKey(block.Bytes); err != nil {
		return nil, fmt.Errorf("parse the public key: %w", err)
	}
	return block.Bytes, nil
}

// CheckPublicKeys checks that each key is one PEM public key; errors
// name the key by its index.
func CheckPublicKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return errors.New("no public key")
	}
	for i, k := range keys {
		if _, err := publicKeyDER(k); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return nil
}
