package sigpolicy

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Paths on the node of the files NodePolicy renders.
const (
	// PolicyPath is the containers signature policy bootc reads.
	PolicyPath = "/etc/containers/policy.json"
	// RegistriesDPath is Strata's registries.d entry.
	RegistriesDPath = "/etc/containers/registries.d/strata.yaml"
	// KeysDir holds the trusted public keys, one file per key.
	KeysDir = "/etc/pki/containers/strata"
)

// File is one file NodePolicy renders: mode 0644, owned by root, the
// same in the image and on the node.
type File struct {
	Path string
	Data []byte
}

// NodePolicy renders the files that make a node verify the images of
// repo (registry/path, no tag) with keys (PEM public keys, two during a
// rotation): policy.json, registries.d and the keys, sorted by path. The
// same inputs give the same bytes in any key order.
//
// policy.json requires a sigstore signature by one of the keys that names
// repo for every image of repo. Its default is "reject" because bootc's
// --enforce-container-sigpolicy refuses a policy whose default accepts
// anything; every transport keeps accepting what it accepted before, so
// that the kubelet's images and local copies are not affected: only the
// pool's own repository is enforced.
func NodePolicy(repo string, keys [][]byte) ([]File, error) {
	if repo == "" || strings.ContainsAny(repo, "@") {
		return nil, fmt.Errorf("repository %q: want registry/path without tag or digest", repo)
	}
	if err := CheckPublicKeys(keys); err != nil {
		return nil, fmt.Errorf("public keys: %w", err)
	}
	byPath := map[string][]byte{}
	for _, k := range keys {
		fp, err := Fingerprint(k)
		if err != nil {
			return nil, err
		}
		p := path.Join(KeysDir, strings.TrimPrefix(fp, "SHA256:")[:16]+".pub")
		byPath[p] = k
	}
	var files []File
	var keyPaths []string
	for p, k := range byPath {
		keyPaths = append(keyPaths, p)
		files = append(files, File{Path: p, Data: k})
	}
	sort.Strings(keyPaths)

	accept := []map[string]any{{"type": "insecureAcceptAnything"}}
	policy := map[string]any{
		"default": []map[string]any{{"type": "reject"}},
		"transports": map[string]any{
			"docker": map[string]any{
				"": accept,
				repo: []map[string]any{{
					"type":           "sigstoreSigned",
					"keyPaths":       keyPaths,
					"signedIdentity": map[string]any{"type": "matchRepository"},
				}},
			},
			"docker-daemon":      map[string]any{"": accept},
			"containers-storage": map[string]any{"": accept},
			"oci":                map[string]any{"": accept},
			"oci-archive":        map[string]any{"": accept},
			"docker-archive":     map[string]any{"": accept},
			"dir":                map[string]any{"": accept},
		},
	}
	pj, err := json.MarshalIndent(policy, "", "  ")
	if err != nil {
		return nil, err
	}
	files = append(files,
		File{Path: PolicyPath, Data: append(pj, '\n')},
		File{Path: RegistriesDPath, Data: fmt.Appendf(nil, "# Written by Strata: the pool's images carry sigstore signatures as attachments.\ndocker:\n  %q:\n    use-sigstore-attachments: true\n", repo)},
	)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}
