package bootcsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// policyFile is the node's containers signature policy, relative to its
// root.
const policyFile = "etc/containers/policy.json"

// PolicyCheck is what bootc's --enforce-container-sigpolicy has
// containers/image evaluate for an image: the node's policy.json, with
// its key paths taken under the node's root (where a real node has them
// at /), and how to reach the image's registry.
type PolicyCheck struct {
	Image         string
	Policy        []byte
	Keychain      authn.Keychain
	Insecure      []string
	RegistriesDir string
}

// SignatureVerifier evaluates a PolicyCheck as containers/image does
// (package sigverify). It is outside this package so that bootc-sim,
// which runs at every step of every simulated node's update, does not
// link containers/image (half its packages and of its start-up time);
// bootc-sim runs bootc-sim-sigpolicy for it.
type SignatureVerifier func(ctx context.Context, c PolicyCheck) error

// verifySigPolicy is bootc's --enforce-container-sigpolicy: bootc refuses
// a policy whose default is insecureAcceptAnything alone (ostree-ext's
// container_policy_is_default_insecure), then fetches through
// containers/image with the booted system's policy.json and
// registries.d, which evaluates the image's signatures. The simulator
// evaluates the same files with the same library (VerifySignatures).
func (s *Sim) verifySigPolicy(ctx context.Context, image string) error {
	c, err := s.PolicyCheck(image)
	if err != nil {
		return err
	}
	if s.VerifySignatures == nil {
		return errors.New("bootc-sim: no signature verifier (bootcsim.Sim.VerifySignatures)")
	}
	if err := s.VerifySignatures(ctx, c); err != nil {
		return fmt.Errorf("fetching %s: %w", image, err)
	}
	fmt.Fprintf(s.out(), "Signature policy satisfied: %s\n", image)
	return nil
}

// PolicyCheck reads what verifying image's signatures on the node takes,
// and refuses a policy that requires none, as bootc does.
func (s *Sim) PolicyCheck(image string) (PolicyCheck, error) {
	data, err := readInRoot(s.Root, policyFile)
	if err != nil {
		return PolicyCheck{}, fmt.Errorf("reading /%s: %w", policyFile, err)
	}
	var p struct {
		Default []struct {
			Type string `json:"type"`
		} `json:"default"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return PolicyCheck{}, fmt.Errorf("parsing /%s: %w", policyFile, err)
	}
	if len(p.Default) == 1 && p.Default[0].Type == "insecureAcceptAnything" {
		return PolicyCheck{}, errors.New("containers-policy.json specifies a default of `insecureAcceptAnything`; refusing usage")
	}
	rooted, err := rootKeyPaths(data, s.Root)
	if err != nil {
		return PolicyCheck{}, fmt.Errorf("parsing /%s: %w", policyFile, err)
	}
	kc, err := loadAuth(s.Root)
	if err != nil {
		return PolicyCheck{}, err
	}
	ref, err := parseReference(image)
	if err != nil {
		return PolicyCheck{}, err
	}
	c := PolicyCheck{Image: image, Policy: rooted, Keychain: kc, RegistriesDir: filepath.Join(s.Root, "etc", "containers", "registries.d")}
	if ref.Context().Scheme() == "http" {
		c.Insecure = []string{ref.Context().RegistryStr()}
	}
	return c, nil
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
