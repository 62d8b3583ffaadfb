// Package registry is the controller's view of image registries: it
// resolves tags to digests, checks that a built image still exists and
// deletes old ones, authenticating with the kubernetes.io/dockerconfigjson
// Secrets a MachineOSConfig names. Credentials stay in memory; errors never
// carry them.
package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
)

// Client talks to registries; Insecure lists host[:port]s reached over
// plain HTTP (the test registry on 127.0.0.1).
type Client struct {
	Insecure []string
}

// callTimeout bounds one registry call: a registry that does not answer
// must not hold a reconcile (and the pools queued behind it) for long.
const callTimeout = 20 * time.Second

// options are shared by every call: few, short retries, for the same
// reason.
func options(ctx context.Context, kc authn.Keychain) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(kc),
		remote.WithRetryBackoff(remote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 2}),
	}
}

// Options are the options of every call of this package, for packages
// that make registry calls of their own with the same bounds (referrers).
func Options(ctx context.Context, kc authn.Keychain) []remote.Option {
	return options(ctx, kc)
}

// ParseReference parses an image reference, honouring the insecure list.
func (c Client) ParseReference(ref string) (name.Reference, error) {
	var opts []name.Option
	if r, err := name.ParseReference(ref); err == nil && slices.Contains(c.Insecure, r.Context().RegistryStr()) {
		opts = append(opts, name.Insecure)
	}
	return name.ParseReference(ref, append(opts, name.StrictValidation)...)
}

// Keychain returns the credentials of a dockerconfigjson Secret; a nil
// Secret is anonymous access.
func Keychain(secret *corev1.Secret) (authn.Keychain, error) {
	if secret == nil {
		return authn.NewMultiKeychain(), nil
	}
	raw, ok := secret.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return nil, fmt.Errorf("secret %s/%s has no %s key (type %s, want %s)", secret.Namespace, secret.Name,
			corev1.DockerConfigJsonKey, secret.Type, corev1.SecretTypeDockerConfigJson)
	}
	return parseAuths(raw, fmt.Sprintf("secret %s/%s", secret.Namespace, secret.Name), corev1.DockerConfigJsonKey)
}

// KeychainFromFile returns the credentials of a Docker config file
// (config.json) or a containers auth file (auth.json): both keep them
// under "auths".
func KeychainFromFile(path string) (authn.Keychain, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read registry credentials: %w", err)
	}
	return parseAuths(raw, "registry credentials "+path, "the file")
}

// parseAuths reads the "auths" of a Docker config; what names where it
// came from and key the part that holds it, in errors.
func parseAuths(raw []byte, what, key string) (authn.Keychain, error) {
	var cfg struct {
		Auths map[string]struct {
			Auth     string `json:"auth"`
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		// The JSON error could quote the secret; do not wrap it.
		return nil, fmt.Errorf("%s: %s is not valid JSON", what, key)
	}
	kc := keychain{}
	for host, a := range cfg.Auths {
		user, pass := a.Username, a.Password
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("%s: auths[%q].auth is not base64", what, host)
			}
			user, pass, _ = strings.Cut(string(dec), ":")
		}
		kc[normalizeHost(host)] = authn.FromConfig(authn.AuthConfig{Username: user, Password: pass})
	}
	return kc, nil
}

type keychain map[string]authn.Authenticator

func (k keychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	if a, ok := k[normalizeHost(res.RegistryStr())]; ok {
		return a, nil
	}
	return authn.Anonymous, nil
}

func normalizeHost(h string) string {
	h = strings.TrimPrefix(strings.TrimPrefix(h, "https://"), "http://")
	h, _, _ = strings.Cut(h, "/")
	if h == "docker.io" || h == "index.docker.io" || h == "registry-1.docker.io" {
		return name.DefaultRegistry
	}
	return h
}

// head asks the registry for ref's manifest: ref parsed, its descriptor's
// digest as repository@sha256:digest, and whether the registry has it (a
// 404 is no error).
func (c Client) head(ctx context.Context, ref string, kc authn.Keychain) (string, bool, error) {
	r, err := c.ParseReference(ref)
	if err != nil {
		return "", false, fmt.Errorf("parse image reference %q: %w", ref, err)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	desc, err := remote.Head(r, options(ctx, kc)...)
	if IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return r.Context().Name() + "@" + desc.Digest.String(), true, nil
}

// Resolve returns ref as repository@sha256:digest; a digest reference is
// returned as it is, after checking that it exists.
func (c Client) Resolve(ctx context.Context, ref string, kc authn.Keychain) (string, error) {
	digested, found, err := c.head(ctx, ref, kc)
	if err == nil && !found {
		err = &transport.Error{StatusCode: http.StatusNotFound}
	}
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", ref, Explain(err))
	}
	return digested, nil
}

// Lookup returns ref (a tag or a digest) as repository@sha256:digest, or ""
// when the registry does not have it.
func (c Client) Lookup(ctx context.Context, ref string, kc authn.Keychain) (string, error) {
	digested, _, err := c.head(ctx, ref, kc)
	if err != nil {
		return "", fmt.Errorf("look up %s: %w", ref, Explain(err))
	}
	return digested, nil
}

// Exists reports whether a digested image is still in its registry.
func (c Client) Exists(ctx context.Context, digested string, kc authn.Keychain) (bool, error) {
	_, found, err := c.head(ctx, digested, kc)
	if err != nil {
		return false, fmt.Errorf("check %s: %w", digested, Explain(err))
	}
	return found, nil
}

// Delete removes a digested image (and so every tag naming it) from its
// registry. An image already gone is not an error.
func (c Client) Delete(ctx context.Context, digested string, kc authn.Keychain) error {
	r, err := c.ParseReference(digested)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err = remote.Delete(r, options(ctx, kc)...)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", digested, Explain(err))
	}
	return nil
}

// Explain shortens a registry error to what a person needs: refused
// credentials say so plainly.
func Explain(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("the registry refused the credentials (HTTP %d)", terr.StatusCode)
		case http.StatusNotFound:
			return errors.New("no such image in the registry")
		}
	}
	return err
}

// IsNotFound tells a registry's 404 (no such manifest or repository).
func IsNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}

// IsUnauthorized tells a refusal of credentials from other failures.
func IsUnauthorized(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden)
}
