package vmbootc

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strings"
)

// Origin is what a deployment's origin file says about its image, as
// bootc (ostree-ext) writes it:
//
//	[origin]
//	container-image-reference=ostree-unverified-registry:<image>
type Origin struct {
	// Image is the image reference; "" when the origin names none (a
	// deployment not made by bootc).
	Image string
	// Transport is the reference's ostree-ext prefix without the image,
	// e.g. "ostree-unverified-registry".
	Transport string
}

const (
	originGroup    = "origin"
	originImageKey = "container-image-reference"
	// unverifiedRegistry is the transport of an image pulled from a
	// registry without signature verification, bootc's default.
	unverifiedRegistry = "ostree-unverified-registry"
)

// String is the origin file's content.
func (o Origin) String() string {
	t := o.Transport
	if t == "" {
		t = unverifiedRegistry
	}
	return "[" + originGroup + "]\n" + originImageKey + "=" + t + ":" + o.Image + "\n"
}

// ParseOrigin reads an origin file's image reference. ostree-ext's
// transports are "<name>:<image>" with names such as
// ostree-unverified-registry, ostree-remote-registry:<remote> and
// ostree-image-signed; the image starts after the transport's colons.
func ParseOrigin(data []byte) Origin {
	group := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "["):
			group = strings.Trim(line, "[]")
		case group == originGroup:
			v, ok := strings.CutPrefix(line, originImageKey+"=")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			t, img, ok := strings.Cut(v, ":")
			if !ok {
				return Origin{Image: v}
			}
			if t == "ostree-remote-registry" || t == "ostree-remote-image" {
				// A remote name comes before the image.
				if remote, rest, ok := strings.Cut(img, ":"); ok {
					t, img = t+":"+remote, rest
				}
			}
			// ostree-unverified-registry:docker://... is also accepted.
			img = strings.TrimPrefix(img, "docker://")
			return Origin{Image: img, Transport: t}
		}
	}
	return Origin{}
}

func readOrigin(path string) (Origin, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Origin{}, nil
	}
	if err != nil {
		return Origin{}, err
	}
	return ParseOrigin(data), nil
}
