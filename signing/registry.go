package signing

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/types"

	"github.com/strata-dev/strata/signing/attached"
)

// Registry is how a registry is reached: the same credentials Strata
// pushes and pulls with elsewhere.
type Registry struct {
	// Keychain gives the credentials; nil is anonymous.
	Keychain authn.Keychain
	// Insecure lists host[:port]s reached over plain HTTP (the test
	// registry on 127.0.0.1).
	Insecure []string
	// RegistriesDir is a registries.d directory to read, as a node's
	// /etc/containers/registries.d; "" uses Strata's own, which reads
	// sigstore attachments of every registry.
	RegistriesDir string
}

// attached is r for package attached, which reads attachments itself.
func (r Registry) attached() attached.Registry {
	return attached.Registry{Keychain: r.Keychain, Insecure: r.Insecure}
}

// attachmentsConfig is the registries.d configuration under which
// containers/image reads and writes sigstore signatures as
// `sha256-<digest>.sig` attachments.
const attachmentsConfig = "default-docker:\n  use-sigstore-attachments: true\n"

// systemContext is a containers/image context for image that reads no
// configuration of the host it runs on (registries.conf, registries.d,
// auth files): only what Strata gives it. dir is a private directory for
// its files; the caller removes it.
func (r Registry) systemContext(ctx context.Context, dir string, image reference.Named) (*types.SystemContext, error) {
	regd := filepath.Join(dir, "registries.d")
	if err := os.MkdirAll(regd, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(regd, "strata.yaml"), []byte(attachmentsConfig), 0o600); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "registries.conf")
	if err := os.WriteFile(conf, nil, 0o600); err != nil {
		return nil, err
	}
	if r.RegistriesDir != "" {
		regd = r.RegistriesDir
	}
	sc := &types.SystemContext{
		RegistriesDirPath:           regd,
		SystemRegistriesConfPath:    conf,
		SystemRegistriesConfDirPath: filepath.Join(dir, "registries.conf.d"),
		AuthFilePath:                filepath.Join(dir, "auth.json"),
		BlobInfoCacheDir:            dir,
		DockerRegistryUserAgent:     "strata",
	}
	host := reference.Domain(image)
	if slices.Contains(r.Insecure, host) {
		sc.DockerInsecureSkipTLSVerify = types.OptionalBoolTrue
	}
	if r.Keychain != nil {
		reg, err := name.NewRegistry(host)
		if err != nil {
			return nil, err
		}
		a, err := authn.Resolve(ctx, r.Keychain, reg)
		if err != nil {
			return nil, fmt.Errorf("credentials for %s: %w", host, err)
		}
		cfg, err := authn.Authorization(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("credentials for %s: %w", host, err)
		}
		if cfg.Username != "" || cfg.Password != "" || cfg.IdentityToken != "" {
			sc.DockerAuthConfig = &types.DockerAuthConfig{Username: cfg.Username, Password: cfg.Password, IdentityToken: cfg.IdentityToken}
		}
	}
	return sc, nil
}

// parseDigested parses repo@sha256:... (a tag before the digest is
// dropped): Strata signs and verifies images by digest only.
func parseDigested(image string) (reference.Canonical, types.ImageReference, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return nil, nil, fmt.Errorf("image %q: %w", image, err)
	}
	c, ok := named.(reference.Canonical)
	if !ok {
		return nil, nil, fmt.Errorf("image %q is not a reference by digest", image)
	}
	c, err = reference.WithDigest(reference.TrimNamed(c), c.Digest())
	if err != nil {
		return nil, nil, err
	}
	ref, err := docker.NewReference(c)
	if err != nil {
		return nil, nil, fmt.Errorf("image %q: %w", image, err)
	}
	return c, ref, nil
}

// Repository is image's repository as policy.json scopes it
// (registry/path, no tag or digest).
func Repository(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	return reference.TrimNamed(named).String(), nil
}

// tempDir is a private directory for one operation's files (a key, the
// registries.d configuration).
func tempDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "strata-signing-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}
