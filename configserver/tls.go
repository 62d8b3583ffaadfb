package configserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// certRefresh is how long a loaded serving certificate is used before
// its Secret is read again: a renewed certificate is served within it.
const certRefresh = time.Minute

// CertSource loads the serving certificate from a kubernetes.io/tls
// Secret (the controller's strata-config-server-tls, or a user's) and
// reloads it as it changes, so a renewal needs no restart.
type CertSource struct {
	// Reader gets the Secret (the API reader: a user's Secret given
	// with --tls-secret need not be in the cache).
	Reader client.Reader
	// Key names the Secret.
	Key client.ObjectKey

	mu      sync.Mutex
	cert    *tls.Certificate
	version string
	loaded  time.Time
}

// GetCertificate is tls.Config's: the current certificate.
func (c *CertSource) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.Load(hello.Context())
}

// Load returns the certificate, read again when it is older than
// certRefresh. A Secret that cannot be read keeps the last good one.
func (c *CertSource) Load(ctx context.Context) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && time.Since(c.loaded) < certRefresh {
		return c.cert, nil
	}
	var sec corev1.Secret
	if err := c.Reader.Get(ctx, c.Key, &sec); err != nil {
		if c.cert != nil {
			return c.cert, nil
		}
		return nil, fmt.Errorf("get serving certificate %s: %w", c.Key, err)
	}
	if c.cert != nil && sec.ResourceVersion == c.version {
		c.loaded = time.Now()
		return c.cert, nil
	}
	cert, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		if c.cert != nil {
			return c.cert, nil
		}
		return nil, fmt.Errorf("serving certificate %s: %w", c.Key, err)
	}
	c.cert, c.version, c.loaded = &cert, sec.ResourceVersion, time.Now()
	return c.cert, nil
}
