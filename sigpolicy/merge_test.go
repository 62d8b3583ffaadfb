package sigpolicy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"

	"github.com/strata-dev/strata/sigpolicy"
)

// unsignedImage is an image with no signature, under a name: what
// containers/image's policy evaluation sees of an image pushed by hand.
type unsignedImage struct{ ref types.ImageReference }

func (u unsignedImage) Reference() types.ImageReference { return u.ref }
func (u unsignedImage) Manifest(context.Context) ([]byte, string, error) {
	return []byte(`{"schemaVersion":2}`), "application/vnd.oci.image.manifest.v1+json", nil
}
func (u unsignedImage) Signatures(context.Context) ([][]byte, error) { return nil, nil }

const someDigest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// allowed evaluates the policy.json of files for an unsigned image by
// name (normalised by containers/image as a pull would), with the keys
// where the policy names them, under a temporary root.
func allowed(t *testing.T, files []sigpolicy.File, image string) (bool, error) {
	t.Helper()
	root := t.TempDir()
	var policy []byte
	for _, f := range files {
		if f.Path == sigpolicy.PolicyPath {
			policy = f.Data
		}
		p := filepath.Join(root, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	policy = bytes.ReplaceAll(policy, []byte(`"`+sigpolicy.KeysDir), []byte(`"`+filepath.Join(root, sigpolicy.KeysDir)))
	policy = bytes.ReplaceAll(policy, []byte(`"/etc/pki/rpm-gpg`), []byte(`"`+filepath.Join(root, "etc/pki/rpm-gpg")))
	p, err := signature.NewPolicyFromBytes(policy)
	if err != nil {
		t.Fatalf("containers/image does not read the policy: %v\n%s", err, policy)
	}
	pc, err := signature.NewPolicyContext(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pc.Destroy() }()
	named, err := reference.ParseNormalizedNamed(image + someDigest)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := docker.NewReference(named)
	if err != nil {
		t.Fatal(err)
	}
	return pc.IsRunningImageAllowed(context.Background(), unsignedImage{ref})
}

// Issue 37 finding 8a: the scope is the repository as containers/image
// normalises it, so a pool pushing to docker.io/<name> or <name> has its
// images verified: evaluated by containers/image, an unsigned image
// under the push spec is refused (a scope written as the spec matched
// nothing, and the image fell to the "" scope, which accepts anything).
func TestNodePolicyNormalisesTheScope(t *testing.T) {
	key := readKey(t, "old.pub")
	for _, tc := range []struct{ spec, scope string }{
		{"docker.io/os", "docker.io/library/os"},
		{"os", "docker.io/library/os"},
		{"index.docker.io/strata/os", "docker.io/strata/os"},
		{"docker.io/strata/os", "docker.io/strata/os"},
		{"quay.io/strata/os", "quay.io/strata/os"},
		{"localhost:5000/os", "localhost:5000/os"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			if got, err := sigpolicy.Scope(tc.spec); err != nil || got != tc.scope {
				t.Fatalf("Scope(%q) = %q, %v; want %q", tc.spec, got, err, tc.scope)
			}
			files, err := sigpolicy.NodePolicy(tc.spec, [][]byte{key})
			if err != nil {
				t.Fatal(err)
			}
			ok, err := allowed(t, files, tc.spec)
			if ok || err == nil || !strings.Contains(err.Error(), "A signature was required, but no signature exists") {
				t.Fatalf("unsigned %s: allowed %v, error %v; want refused for want of a signature", tc.spec, ok, err)
			}
			if ok, err := allowed(t, files, "quay.io/other/app"); !ok || err != nil {
				t.Fatalf("another repository: allowed %v, %v; want accepted as before", ok, err)
			}
			for _, f := range files {
				if f.Path == sigpolicy.RegistriesDPath && !strings.Contains(string(f.Data), `"`+tc.scope+`":`) {
					t.Fatalf("registries.d does not name %s:\n%s", tc.scope, f.Data)
				}
			}
		})
	}
	if _, err := sigpolicy.Scope("r.example/OS"); err == nil {
		t.Fatal("an upper-case repository is accepted")
	}
}

// A RHEL base's policy.json: signedBy for Red Hat's registries, anything
// else accepted.
const rhelPolicy = `{
    "default": [
        {
            "type": "insecureAcceptAnything"
        }
    ],
    "transports": {
        "docker": {
            "registry.access.redhat.com": [
                {
                    "type": "signedBy",
                    "keyType": "GPGKeys",
                    "keyPath": "/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release"
                }
            ],
            "registry.redhat.io": [
                {
                    "type": "signedBy",
                    "keyType": "GPGKeys",
                    "keyPath": "/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release"
                }
            ],
            "quay.io/strata/os": [
                {
                    "type": "insecureAcceptAnything"
                }
            ]
        },
        "docker-daemon": {
            "": [
                {
                    "type": "insecureAcceptAnything"
                }
            ]
        }
    }
}
`

// Issue 37 finding 8b: the node policy is merged into the base's: its
// signedBy requirements still refuse an unsigned image of Red Hat's
// registries, Strata's scope replaces the base's for the same
// repository, and everything else is accepted as before.
func TestMergeNodePolicyKeepsTheBase(t *testing.T) {
	key := readKey(t, "old.pub")
	files, err := sigpolicy.MergeNodePolicy([]byte(rhelPolicy), "quay.io/strata/os", [][]byte{key})
	if err != nil {
		t.Fatal(err)
	}
	for image, refused := range map[string]bool{
		"registry.redhat.io/ubi9/ubi":         true,
		"registry.access.redhat.com/ubi9/ubi": true,
		"quay.io/strata/os":                   true,
		"quay.io/strata/other":                false,
		"docker.io/library/busybox":           false,
	} {
		ok, err := allowed(t, files, image)
		if refused && (ok || err == nil) {
			t.Errorf("unsigned %s accepted by the merged policy; the base (or Strata) refuses it", image)
		}
		if !refused && (!ok || err != nil) {
			t.Errorf("%s: allowed %v, %v; the base accepts it", image, ok, err)
		}
	}
	var doc struct {
		Default    []map[string]any                       `json:"default"`
		Transports map[string]map[string][]map[string]any `json:"transports"`
	}
	if err := json.Unmarshal(policyOf(t, files), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Default) != 1 || doc.Default[0]["type"] != "reject" {
		t.Errorf("default %v, want reject (bootc's enforcement refuses insecureAcceptAnything)", doc.Default)
	}
	if got := doc.Transports["docker"]["registry.redhat.io"]; len(got) != 1 || got[0]["keyPath"] != "/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release" {
		t.Errorf("registry.redhat.io: %v, want the base's signedBy", got)
	}
}

func policyOf(t *testing.T, files []sigpolicy.File) []byte {
	t.Helper()
	for _, f := range files {
		if f.Path == sigpolicy.PolicyPath {
			return f.Data
		}
	}
	t.Fatal("no policy.json")
	return nil
}

// Merging into a node's policy.json that an earlier merge wrote (other
// keys, another repository) gives what merging into the base gives:
// the daemon merges into the node's file, the image carries the merge
// into the base's, and the two must be the same bytes.
func TestMergeNodePolicyIsIdempotent(t *testing.T) {
	oldKey, newKey := readKey(t, "old.pub"), readKey(t, "new.pub")
	for name, base := range map[string][]byte{"none": nil, "rhel": []byte(rhelPolicy)} {
		t.Run(name, func(t *testing.T) {
			first, err := sigpolicy.MergeNodePolicy(base, "registry.example.com/os/old", [][]byte{oldKey})
			if err != nil {
				t.Fatal(err)
			}
			again, err := sigpolicy.MergeNodePolicy(policyOf(t, first), "registry.example.com/os/worker", [][]byte{newKey})
			if err != nil {
				t.Fatal(err)
			}
			direct, err := sigpolicy.MergeNodePolicy(base, "registry.example.com/os/worker", [][]byte{newKey})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(policyOf(t, again), policyOf(t, direct)) {
				t.Fatalf("merged twice:\n%s\nmerged into the base:\n%s", policyOf(t, again), policyOf(t, direct))
			}
		})
	}
	// Fedora's and CentOS's base policy: the merge is NodePolicy's.
	fedora := []byte(`{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker-daemon":{"":[{"type":"insecureAcceptAnything"}]}}}`)
	merged, err := sigpolicy.MergeNodePolicy(fedora, "registry.example.com/os/worker", [][]byte{oldKey})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := sigpolicy.NodePolicy("registry.example.com/os/worker", [][]byte{oldKey})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(render(merged), render(plain)) {
		t.Fatalf("a Fedora base merged:\n%s\nNodePolicy:\n%s", render(merged), render(plain))
	}
}

// A base that is not a policy.json is refused, never replaced.
func TestMergeNodePolicyRefusesABadBase(t *testing.T) {
	key := readKey(t, "old.pub")
	for name, base := range map[string]string{
		"not JSON":         "{",
		"empty":            "",
		"no default":       `{"transports":{}}`,
		"default a string": `{"default":"reject"}`,
		"scope not a list": `{"default":[{"type":"reject"}],"transports":{"docker":{"quay.io":{}}}}`,
		"untyped":          `{"default":[{}]}`,
		"two objects":      `{"default":[{"type":"reject"}]} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sigpolicy.MergeNodePolicy([]byte(base), "quay.io/strata/os", [][]byte{key})
			if err == nil || !strings.Contains(err.Error(), "base "+sigpolicy.PolicyPath) {
				t.Fatalf("error %v, want one naming the base %s", err, sigpolicy.PolicyPath)
			}
		})
	}
}
