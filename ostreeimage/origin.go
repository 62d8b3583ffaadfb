package ostreeimage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// The origin file of a deployment (<deployment>.origin, a GKeyFile) says
// what the deployment was made from; bootc writes, for an image pulled
// from a registry without signature verification:
//
//	[origin]
//	container-image-reference=ostree-unverified-registry:<image>
//
// and reads the image reference back from it for `bootc status` and
// `bootc upgrade`.
const (
	// OriginGroup is the origin file's group bootc writes.
	OriginGroup = "origin"
	// OriginImageKey is the key of the image reference in OriginGroup.
	OriginImageKey = "container-image-reference"
	// OriginUnverifiedRegistry is the transport prefix of an image pulled
	// from a registry without signature verification.
	OriginUnverifiedRegistry = "ostree-unverified-registry:"
	// originUnverifiedImage is ostree-ext's longer spelling of the same:
	// ostree-unverified-image:registry:<image> or
	// ostree-unverified-image:docker://<image>.
	originUnverifiedImage = "ostree-unverified-image:"
)

// Origin is what bootc's origin file records.
type Origin struct {
	// Image is the image reference (registry/repository:tag or @digest).
	Image string
}

// String is the origin file's content, as bootc writes it.
func (o Origin) String() string {
	return "[" + OriginGroup + "]\n" + OriginImageKey + "=" + OriginUnverifiedRegistry + o.Image + "\n"
}

// ParseOrigin reads an origin file. Other groups and keys are ignored;
// an image reference with signature verification (ostree-image-signed:,
// ostree-remote-image:) is an error, as Strata's nodes pull unverified by
// ostree and verify by policy.json.
func ParseOrigin(data []byte) (Origin, error) {
	var o Origin
	group := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	found := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			group = line[1 : len(line)-1]
		case group == OriginGroup:
			key, value, ok := strings.Cut(line, "=")
			if !ok || strings.TrimSpace(key) != OriginImageKey {
				continue
			}
			image, err := parseImageReference(strings.TrimSpace(value))
			if err != nil {
				return Origin{}, err
			}
			o.Image, found = image, true
		}
	}
	if err := sc.Err(); err != nil {
		return Origin{}, err
	}
	if !found {
		return Origin{}, errors.New("origin file has no [origin] " + OriginImageKey)
	}
	return o, nil
}

func parseImageReference(v string) (string, error) {
	image, ok := strings.CutPrefix(v, OriginUnverifiedRegistry)
	if !ok {
		rest, ok2 := strings.CutPrefix(v, originUnverifiedImage)
		if !ok2 {
			return "", fmt.Errorf("origin %s %q: only %s image references are supported", OriginImageKey, v, OriginUnverifiedRegistry)
		}
		if image, ok = strings.CutPrefix(rest, "registry:"); !ok {
			if image, ok = strings.CutPrefix(rest, "docker://"); !ok {
				return "", fmt.Errorf("origin %s %q: only the registry transport is supported", OriginImageKey, v)
			}
		}
	}
	if image == "" {
		return "", fmt.Errorf("origin %s %q: no image", OriginImageKey, v)
	}
	return image, nil
}
