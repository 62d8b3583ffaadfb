package bootcsim

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// AuthFiles are the registry credential files bootc reads, relative to
// the node's root, in order: the first that exists is used.
var AuthFiles = []string{"run/ostree/auth.json", "etc/ostree/auth.json", "usr/lib/ostree/auth.json"}

// authKeychain is the node's auth file as a go-containerregistry
// keychain. Path is "" when the node has no auth file.
type authKeychain struct {
	Path  string
	auths map[string]authn.AuthConfig
}

// loadAuth reads the first of AuthFiles under root, never following a
// link out of root.
func loadAuth(root string) (*authKeychain, error) {
	for _, rel := range AuthFiles {
		data, err := readInRoot(root, rel)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read auth file /%s: %w", rel, err)
		}
		kc, err := parseAuthFile(data)
		if err != nil {
			return nil, fmt.Errorf("auth file /%s: %w", rel, err)
		}
		kc.Path = "/" + rel
		return kc, nil
	}
	return &authKeychain{}, nil
}

func readInRoot(root, rel string) ([]byte, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	return r.ReadFile(rel)
}

// parseAuthFile reads a containers auth.json (the docker config format):
// {"auths": {"registry[/namespace[/repo]]": {"auth": base64(user:pass)}}}.
func parseAuthFile(data []byte) (*authKeychain, error) {
	var file struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			Username      string `json:"username"`
			Password      string `json:"password"`
			IdentityToken string `json:"identitytoken"`
			RegistryToken string `json:"registrytoken"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("not a docker config JSON: %w", err)
	}
	kc := &authKeychain{auths: map[string]authn.AuthConfig{}}
	for key, e := range file.Auths {
		cfg := authn.AuthConfig{Username: e.Username, Password: e.Password,
			IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken}
		if e.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(e.Auth)
			if err != nil {
				return nil, fmt.Errorf("auths[%q].auth is not base64: %w", key, err)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf("auths[%q].auth is not base64 of user:password", key)
			}
			cfg.Username, cfg.Password = user, pass
		}
		kc.auths[normalizeAuthKey(key)] = cfg
	}
	return kc, nil
}

// normalizeAuthKey turns the legacy forms ("https://host/v1/",
// "docker.io") into the registry[/path] form references are matched in.
func normalizeAuthKey(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key = strings.TrimSuffix(strings.TrimSuffix(key, "/"), "/v1")
	host, rest, _ := strings.Cut(key, "/")
	if host == "docker.io" || host == "registry-1.docker.io" {
		host = "index.docker.io"
	}
	if rest != "" {
		return host + "/" + rest
	}
	return host
}

// Resolve returns the credentials of the most specific key that matches
// the repository (host/a/b, then host/a, then host), as containers'
// auth.json lookup does; anonymous when none does.
func (k *authKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	if len(k.auths) == 0 {
		return authn.Anonymous, nil
	}
	name := target.String()
	for {
		if cfg, ok := k.auths[name]; ok {
			return authn.FromConfig(cfg), nil
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			break
		}
		name = name[:i]
	}
	return authn.Anonymous, nil
}
