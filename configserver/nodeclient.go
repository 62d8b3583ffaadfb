package configserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// nodeRequestTimeout bounds one read of a node input; the daemon's sync
// retries a failed one with its backoff.
const nodeRequestTimeout = 30 * time.Second

// maxNodeInput bounds what is read of an answer: a MachineConfig is an
// API object (at most etcd's 1.5 MiB), with JSON around it.
const maxNodeInput = 8 << 20

// NodeClient is the daemon's side of NodeServer: it reads the node's
// rendered configs and pull secret from the config server, with the
// token the kubelet projects into the daemon's pod for audience
// NodeTokenAudience. Both files are read at every request: the kubelet
// renews the token, and the CA is a ConfigMap the controller republishes
// when it replaces the CA.
type NodeClient struct {
	// URL is the server's, https://host:port.
	URL string
	// CAFile is the PEM CA that signed the server's certificate.
	CAFile string
	// TokenFile holds the token.
	TokenFile string

	mu     sync.Mutex
	ca     []byte
	client *http.Client
}

// MachineConfig reads rendered config name.
func (c *NodeClient) MachineConfig(ctx context.Context, name string) (*v1alpha1.MachineConfig, error) {
	body, err := c.get(ctx, NodeMachineConfigPath+name)
	if err != nil {
		return nil, err
	}
	var mc v1alpha1.MachineConfig
	if err := json.Unmarshal(body, &mc); err != nil {
		return nil, fmt.Errorf("rendered config %s from the config server: %w", name, err)
	}
	if mc.Name != name {
		return nil, fmt.Errorf("the config server answered rendered config %q for %s", mc.Name, name)
	}
	return &mc, nil
}

// PullSecret reads pull secret name's .dockerconfigjson.
func (c *NodeClient) PullSecret(ctx context.Context, name string) ([]byte, error) {
	return c.get(ctx, NodePullSecretPath+name)
}

func (c *NodeClient) get(ctx context.Context, path string) ([]byte, error) {
	hc, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	token, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("read the config server token: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, nodeRequestTimeout)
	defer cancel()
	url := strings.TrimSuffix(c.URL, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("config server: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxNodeInput+1))
	if err != nil {
		return nil, fmt.Errorf("config server: GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		// The server says no more than the status; a secret is never in
		// a refusal.
		return nil, fmt.Errorf("config server: GET %s: %s", url, resp.Status)
	}
	if len(body) > maxNodeInput {
		return nil, fmt.Errorf("config server: GET %s: the answer is over %d bytes", url, maxNodeInput)
	}
	return body, nil
}

// httpClient is a client trusting the CA in CAFile, made again when the
// file changed.
func (c *NodeClient) httpClient() (*http.Client, error) {
	ca, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("read the config server's CA: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil && bytes.Equal(ca, c.ca) {
		return c.client, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("the config server's CA %s holds no PEM certificate", c.CAFile)
	}
	if c.client != nil {
		c.client.CloseIdleConnections()
	}
	c.client = &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		// Not the environment's proxy: the server is in the cluster.
		Proxy: nil,
	}}
	c.ca = ca
	return c.client, nil
}
