package sigpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"go.podman.io/image/v5/docker/reference"
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

// acceptingTransports are the transports whose images a policy with a
// default of insecureAcceptAnything accepted and still accepts once
// Strata makes the default "reject" (containers-transports(5), those a
// node's podman, CRI-O or kubelet use).
var acceptingTransports = []string{"containers-storage", "dir", "docker", "docker-archive", "docker-daemon", "oci", "oci-archive"}

// Scope is repo's scope in policy.json's "docker" transport and in
// registries.d: the repository normalised as containers/image
// normalises every image name before matching it (docker.io for a name
// without a registry, library/ for a single path component on docker.io,
// index.docker.io as docker.io). A scope written as the push spec is
// spelled ("docker.io/os", "os") would match no image, and the pool's
// images would be accepted unverified.
func Scope(repo string) (string, error) {
	if repo == "" || strings.ContainsAny(repo, "@") {
		return "", fmt.Errorf("repository %q: want registry/path without tag or digest", repo)
	}
	named, err := reference.ParseNormalizedNamed(repo)
	if err != nil {
		return "", fmt.Errorf("repository %q: %w", repo, err)
	}
	if !reference.IsNameOnly(named) {
		return "", fmt.Errorf("repository %q: want registry/path without tag or digest", repo)
	}
	return named.Name(), nil
}

// NodePolicy renders the files that make a node verify the images of
// repo (registry/path, no tag) with keys (PEM public keys, two during a
// rotation): policy.json, registries.d and the keys, sorted by path,
// for a node whose base image has no policy.json of its own (treated as
// containers-common's default, which accepts anything). It is
// MergeNodePolicy(nil, repo, keys).
func NodePolicy(repo string, keys [][]byte) ([]File, error) {
	return MergeNodePolicy(nil, repo, keys)
}

// MergeNodePolicy renders NodePolicy's files with policy.json merged
// into base, the policy.json the node (or its base image) has; nil for
// none. The same inputs give the same bytes in any key order.
//
// The merged policy requires, for every image of repo's Scope, a
// sigstore signature by one of keys that names that repository. Every
// other requirement of base stays: its default and every scope of every
// transport (a RHEL base's signedBy for registry.redhat.io keeps
// applying to podman and CRI-O). On the one conflicting scope, Strata's
// requirement replaces base's: the pool's images are signed by the
// pool's keys, which a base's requirement for the same repository would
// not accept. Scopes an earlier MergeNodePolicy added (sigstoreSigned
// with keys under KeysDir) are dropped first, so that merging into a
// node's policy.json written from other inputs (a repository changed
// since) gives what merging into the base gives.
//
// A default of insecureAcceptAnything (containers-common's) becomes
// "reject", because bootc's --enforce-container-sigpolicy refuses a
// policy whose default accepts anything; each transport a node uses then
// gets a "" scope that accepts anything, unless it has one, so that
// everything base accepted (the kubelet's images, local copies) is
// still accepted. A base that is not a policy.json (not JSON, or
// default or transports of the wrong shape) is an error, never
// replaced.
func MergeNodePolicy(base []byte, repo string, keys [][]byte) ([]File, error) {
	scope, err := Scope(repo)
	if err != nil {
		return nil, err
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

	policy, err := parseBase(base)
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", PolicyPath, err)
	}
	transports := policy["transports"].(map[string]any)
	if acceptsAnything(policy["default"].([]any)) {
		policy["default"] = []any{map[string]any{"type": "reject"}}
		for _, t := range acceptingTransports {
			if _, ok := transports[t]; !ok {
				transports[t] = map[string]any{}
			}
		}
		for _, scopes := range transports {
			scopes := scopes.(map[string]any)
			if _, ok := scopes[""]; !ok {
				scopes[""] = []any{map[string]any{"type": "insecureAcceptAnything"}}
			}
		}
	}
	docker, _ := transports["docker"].(map[string]any)
	if docker == nil {
		docker = map[string]any{}
		transports["docker"] = docker
	}
	for s, reqs := range docker {
		if strataRequirements(reqs.([]any)) {
			delete(docker, s)
		}
	}
	docker[scope] = []any{map[string]any{
		"type":           "sigstoreSigned",
		"keyPaths":       keyPaths,
		"signedIdentity": map[string]any{"type": "matchRepository"},
	}}
	pj, err := json.MarshalIndent(policy, "", "  ")
	if err != nil {
		return nil, err
	}
	files = append(files,
		File{Path: PolicyPath, Data: append(pj, '\n')},
		File{Path: RegistriesDPath, Data: fmt.Appendf(nil, "# Written by Strata: the pool's images carry sigstore signatures as attachments.\ndocker:\n  %q:\n    use-sigstore-attachments: true\n", scope)},
	)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// parseBase reads a policy.json into generic maps (numbers kept as
// written), checking the shape of default and transports as
// containers/image does; nil is a policy that accepts anything.
func parseBase(base []byte) (map[string]any, error) {
	if base == nil {
		return map[string]any{
			"default":    []any{map[string]any{"type": "insecureAcceptAnything"}},
			"transports": map[string]any{},
		}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(base))
	dec.UseNumber()
	var policy map[string]any
	if err := dec.Decode(&policy); err != nil {
		return nil, fmt.Errorf("not a policy.json: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a policy.json: data after the object")
	}
	if policy == nil {
		return nil, errors.New("not a policy.json: null")
	}
	def, ok := policy["default"].([]any)
	if !ok || len(def) == 0 {
		return nil, errors.New(`"default": want a non-empty list of requirements`)
	}
	if err := checkRequirements(def); err != nil {
		return nil, fmt.Errorf(`"default": %w`, err)
	}
	if _, ok := policy["transports"]; !ok {
		policy["transports"] = map[string]any{}
	}
	transports, ok := policy["transports"].(map[string]any)
	if !ok {
		return nil, errors.New(`"transports": want an object of transports`)
	}
	for t, scopes := range transports {
		scopes, ok := scopes.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("transports.%s: want an object of scopes", t)
		}
		for s, reqs := range scopes {
			reqs, ok := reqs.([]any)
			if !ok || len(reqs) == 0 {
				return nil, fmt.Errorf("transports.%s[%q]: want a non-empty list of requirements", t, s)
			}
			if err := checkRequirements(reqs); err != nil {
				return nil, fmt.Errorf("transports.%s[%q]: %w", t, s, err)
			}
		}
	}
	return policy, nil
}

// checkRequirements checks that each requirement is an object with a
// type.
func checkRequirements(reqs []any) error {
	for i, r := range reqs {
		m, ok := r.(map[string]any)
		if !ok {
			return fmt.Errorf("[%d]: want an object", i)
		}
		if t, ok := m["type"].(string); !ok || t == "" {
			return fmt.Errorf("[%d]: no type", i)
		}
	}
	return nil
}

// acceptsAnything says whether a default is insecureAcceptAnything
// alone, which bootc's --enforce-container-sigpolicy refuses.
func acceptsAnything(def []any) bool {
	return len(def) == 1 && def[0].(map[string]any)["type"] == "insecureAcceptAnything"
}

// strataRequirements says whether reqs are a scope a MergeNodePolicy
// wrote: sigstoreSigned with every key under KeysDir.
func strataRequirements(reqs []any) bool {
	for _, r := range reqs {
		m := r.(map[string]any)
		if m["type"] != "sigstoreSigned" || m["keyPath"] != nil || m["keyData"] != nil || m["keyDatas"] != nil {
			return false
		}
		paths, ok := m["keyPaths"].([]any)
		if !ok || len(paths) == 0 {
			return false
		}
		for _, p := range paths {
			s, ok := p.(string)
			if !ok || path.Dir(s) != KeysDir {
				return false
			}
		}
	}
	return true
}
