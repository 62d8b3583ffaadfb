package vmbootc

import (
	"context"
	"encoding/json"
	"strings"
)

// The metadata of image commits is read with one `ostree show --raw` per
// commit: in the guest, under software emulation, every ostree run costs
// about a second, and status reads every deployment's commit.

// metaImageConfig is ostree-ext's (and package ostreeimage's) copy of the
// image configuration in the image commit.
const metaImageConfig = "ostree.container.image-config"

// commitMetadata is a commit's string metadata.
func commitMetadata(ctx context.Context, ostree []string, repo, csum string) (map[string]string, error) {
	out, err := runOstree(ctx, ostree, "show", "--repo="+repo, "--raw", csum)
	if err != nil {
		return nil, err
	}
	return parseMetadataStrings(out), nil
}

// imageOfCommit is what the commit's metadata says of its image: the
// digest (ostree.manifest-digest) and, from this package's keys or the
// image configuration ostree-ext keeps, version, creation time and
// architecture.
func imageOfCommit(csum string, meta map[string]string) *Image {
	im := &Image{Checksum: csum, Digest: meta[metaDigest], Version: meta[metaVersion],
		Created: meta[metaCreated], Architecture: meta[metaArch]}
	if raw, ok := meta[metaImageConfig]; ok {
		var cfg struct {
			Architecture string `json:"architecture"`
			Created      string `json:"created"`
			Config       struct {
				Labels map[string]string `json:"Labels"`
			} `json:"config"`
		}
		if json.Unmarshal([]byte(raw), &cfg) == nil {
			if im.Version == "" {
				im.Version = cfg.Config.Labels["org.opencontainers.image.version"]
			}
			if im.Created == "" {
				im.Created = cfg.Created
			}
			if im.Architecture == "" {
				im.Architecture = cfg.Architecture
			}
		}
	}
	return im
}

// parseMetadataStrings reads the string entries of the metadata
// dictionary that opens a commit in GVariant text format, as `ostree
// show --raw` prints it after its "commit <checksum>" line:
//
//	({'version': <'1'>, 'ostree.ref-binding': <['x']>, ...}, @ay [], ...)
//
// Entries of other types are skipped.
func parseMetadataStrings(raw string) map[string]string {
	m := map[string]string{}
	i := strings.Index(raw, "({")
	if i < 0 {
		return m
	}
	s := raw[i+2:]
	for {
		s = strings.TrimLeft(s, " ,\n")
		key, rest, ok := cutGVariantString(s)
		if !ok {
			return m
		}
		s, ok = strings.CutPrefix(rest, ": <")
		if !ok {
			return m
		}
		if value, rest, ok := cutGVariantString(s); ok && strings.HasPrefix(rest, ">") {
			m[key] = value
			s = rest[1:]
			continue
		}
		if s, ok = skipValue(s); !ok {
			return m
		}
	}
}

// cutGVariantString reads the quoted string s starts with.
func cutGVariantString(s string) (value, rest string, ok bool) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", s, false
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case s[0]:
			v, err := parseGVariantString(s[:i+1])
			return v, s[i+1:], err == nil
		}
	}
	return "", s, false
}

// skipValue skips the rest of a variant whose "<" was read: up to its
// closing ">", across nested brackets and quoted strings.
func skipValue(s string) (string, bool) {
	depth := 1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"':
			_, rest, ok := cutGVariantString(s[i:])
			if !ok {
				return s, false
			}
			i = len(s) - len(rest) - 1
		case '<', '[', '(', '{':
			depth++
		case '>', ']', ')', '}':
			depth--
			if depth == 0 {
				return s[i+1:], true
			}
		}
	}
	return s, false
}
