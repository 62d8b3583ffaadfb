package bootcsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/strata-dev/strata/signing"
)

// policyFile is the node's containers signature policy, relative to its
// root.
const policyFile = "etc/containers/policy.json"

// verifySigPolicy is bootc's --enforce-container-sigpolicy: bootc refuses
// a policy whose default is insecureAcceptAnything alone (ostree-ext's
// container_policy_is_default_insecure), then fetches through
// containers/image with the booted system's policy.json and
// registries.d, which evaluates the image's signatures. The simulator
// evaluates the same files with the same library; only the key paths in
// the policy are taken relative to the node's root, where a real node
// has them at /.
func (s *Sim) verifySigPolicy(ctx context.Context, image string) error {
	data, err := readInRoot(s.Root, policyFile)
	if err != nil {
		return fmt.Errorf("reading /%s: %w", policyFile, err)
	}
	var p struct {
		Default []struct {
			Type string `json:"type"`
		} `json:"default"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("parsing /%s: %w", policyFile, err)
	}
	if len(p.Default) == 1 && p.Default[0].Type == "insecureAcceptAnything" {
		return errors.New("containers-policy.json specifies a default of `insecureAcceptAnything`; refusing usage")
	}
	rooted, err := rootKeyPaths(data, s.Root)
	if err != nil {
		return fmt.Errorf("parsing /%s: %w", policyFile, err)
	}
	kc, err := loadAuth(s.Root)
	if err != nil {
		return err
	}
	ref, err := parseReference(image)
	if err != nil {
		return err
	}
	reg := signing.Registry{Keychain: kc, RegistriesDir: filepath.Join(s.Root, "etc", "containers", "registries.d")}
	if ref.Context().Scheme() == "http" {
		reg.Insecure = []string{ref.Context().RegistryStr()}
	}
	if err := signing.VerifyPolicy(ctx, image, rooted, reg); err != nil {
		return fmt.Errorf("fetching %s: %w", image, err)
	}
	fmt.Fprintf(s.out(), "Signature policy satisfied: %s\n", image)
	return nil
}

// rootKeyPaths puts root before every keyPath and keyPaths entry of a
// policy.json.
func rootKeyPaths(data []byte, root string) ([]byte, error) {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	var walk func(v any)
	join := func(p any) any {
		if s, ok := p.(string); ok && strings.HasPrefix(s, "/") {
			return filepath.Join(root, s)
		}
		return p
	}
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				switch k {
				case "keyPath", "rekorPublicKeyPath":
					v[k] = join(e)
				case "keyPaths", "rekorPublicKeyPaths":
					if list, ok := e.([]any); ok {
						for i := range list {
							list[i] = join(list[i])
						}
					}
				default:
					walk(e)
				}
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return json.Marshal(doc)
}
