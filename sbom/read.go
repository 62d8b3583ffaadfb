package sbom

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// File is one file, directory or link of an SBOM, as Read returns it.
type File struct {
	// Path is absolute ("/etc/chrony.d/strata.conf").
	Path string `json:"path"`
	// SHA256 is the checksum the SBOM gives (see Generate for links and
	// directories).
	SHA256 string `json:"sha256"`
	FileAnnotation
}

// Description is what an SBOM Strata wrote says about its image.
type Description struct {
	Image       string `json:"image"`
	ImageDigest string `json:"imageDigest"`
	Base        string `json:"base"`
	BaseDigest  string `json:"baseDigest"`
	// Configuration is the pool, rendered config, input hash, kernel
	// arguments and units.
	Configuration ImageAnnotation `json:"configuration"`
	Files         []File          `json:"files"`
}

// Read reads an SBOM that Generate wrote. A document of another kind, or
// one without Strata's annotations, is an error.
func Read(data []byte) (*Description, error) {
	var doc document
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("sbom: not SPDX JSON: %w", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" {
		return nil, fmt.Errorf("sbom: spdxVersion %q, not SPDX-2.3", doc.SPDXVersion)
	}
	d := &Description{}
	found := false
	for _, p := range doc.Packages {
		switch p.SPDXID {
		case "SPDXRef-Image":
			d.Image, d.ImageDigest = p.Name, p.VersionInfo
			for _, a := range p.Annotations {
				if ok, err := unmarshalAnnotation(a, ImageAnnotationPrefix, &d.Configuration); err != nil {
					return nil, err
				} else if ok {
					found = true
				}
			}
		case "SPDXRef-Base":
			d.Base, d.BaseDigest = p.Name, p.VersionInfo
		}
	}
	if !found {
		return nil, errors.New("sbom: no " + ImageAnnotationPrefix + " annotation on the image's package: not an SBOM Strata wrote")
	}
	for _, f := range doc.Files {
		out := File{Path: strings.TrimPrefix(f.FileName, ".")}
		for _, c := range f.Checksums {
			if c.Algorithm == "SHA256" {
				out.SHA256 = c.Value
			}
		}
		for _, a := range f.Annotations {
			if _, err := unmarshalAnnotation(a, FileAnnotationPrefix, &out.FileAnnotation); err != nil {
				return nil, fmt.Errorf("%s: %w", out.Path, err)
			}
		}
		d.Files = append(d.Files, out)
	}
	return d, nil
}

func unmarshalAnnotation(a spdxAnnotation, prefix string, v any) (bool, error) {
	rest, ok := strings.CutPrefix(a.Comment, prefix+" ")
	if !ok || a.Annotator != tool {
		return false, nil
	}
	if err := json.Unmarshal([]byte(rest), v); err != nil {
		return false, fmt.Errorf("sbom: annotation %s: %w", prefix, err)
	}
	return true, nil
}
