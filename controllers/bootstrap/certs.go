package bootstrap

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Lifetimes. The CA is in every pointer config handed out, so it lives
// long; the serving certificate is renewed well before it expires.
const (
	caLifetime      = 10 * 365 * 24 * time.Hour
	servingLifetime = 365 * 24 * time.Hour
	// backdate covers clocks a little behind the controller's.
	backdate = 5 * time.Minute
)

// keyPair is a certificate and its key, PEM-encoded.
type keyPair struct {
	cert, key []byte
}

// newCA makes a self-signed CA.
func newCA(now time.Time) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "strata-config-server-ca"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, nil, nil)
}

// newServing makes a serving certificate for names (DNS names or IPs),
// signed by ca.
func newServing(ca keyPair, names []string, now time.Time) (keyPair, error) {
	caCert, caKey, err := parse(ca)
	if err != nil {
		return keyPair{}, fmt.Errorf("CA: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: names[0]},
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(servingLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	return sign(tmpl, caCert, caKey)
}

func sign(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return keyPair{}, err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return keyPair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func parse(kp keyPair) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(kp.cert)
	kb, _ := pem.Decode(kp.key)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// renewAt is when a certificate valid from notBefore to notAfter is
// renewed: after two thirds of its life.
func renewAt(notBefore, notAfter time.Time) time.Time {
	return notBefore.Add(notAfter.Sub(notBefore) * 2 / 3)
}

// servingFresh says whether serving is a certificate for exactly names,
// signed by ca, not yet due for renewal at now; otherwise why not.
func servingFresh(serving, ca keyPair, names []string, now time.Time) (time.Time, string) {
	cert, _, err := parse(serving)
	if err != nil {
		return time.Time{}, "unreadable: " + err.Error()
	}
	caCert, _, err := parse(ca)
	if err != nil {
		return time.Time{}, "CA unreadable: " + err.Error()
	}
	if err := cert.CheckSignatureFrom(caCert); err != nil {
		return time.Time{}, "not signed by the current CA"
	}
	var have []string
	have = append(have, cert.DNSNames...)
	for _, ip := range cert.IPAddresses {
		have = append(have, ip.String())
	}
	want := slices.Clone(names)
	slices.Sort(have)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		return time.Time{}, fmt.Sprintf("names %v, want %v", have, want)
	}
	at := renewAt(cert.NotBefore, cert.NotAfter)
	if !now.Before(at) {
		return time.Time{}, "due for renewal since " + at.UTC().Format(time.RFC3339)
	}
	return at, ""
}

// caFresh says whether ca is readable and not due for renewal at now.
func caFresh(ca keyPair, now time.Time) (time.Time, string) {
	cert, _, err := parse(ca)
	if err != nil {
		return time.Time{}, "unreadable: " + err.Error()
	}
	if !cert.IsCA || !bytes.Equal(cert.RawIssuer, cert.RawSubject) {
		return time.Time{}, "not a self-signed CA"
	}
	at := renewAt(cert.NotBefore, cert.NotAfter)
	if !now.Before(at) {
		return time.Time{}, "due for renewal since " + at.UTC().Format(time.RFC3339)
	}
	return at, ""
}
