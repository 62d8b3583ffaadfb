package sbom

import (
	"archive/tar"
	"bytes"
	"crypto/sha1" //nolint:gosec // SPDX 2.3 makes a file's SHA1 mandatory; SHA256 is given too.
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/imageref"
	"github.com/strata-dev/strata/nodeconfig"
)

// ArtifactType is the OCI artifact type of the SBOM referrer.
const ArtifactType = "application/spdx+json"

// Prefixes of the machine-readable SPDX annotations: the comment is the
// prefix, a space and a JSON object (FileAnnotation, ImageAnnotation).
const (
	FileAnnotationPrefix  = "strata.dev/file"
	ImageAnnotationPrefix = "strata.dev/configuration"
)

// created is the documents' creation time: fixed, so that the same input
// gives the same bytes, like the images' --timestamp 0.
const created = "1970-01-01T00:00:00Z"

const tool = "Tool: strata"

// Input is what an SBOM describes.
type Input struct {
	// Image is the repository the image is pushed to, without tag or
	// digest ("registry.example.com/os/worker").
	Image string
	// ImageDigest is the image manifest's digest, "sha256:<hex>".
	ImageDigest string
	// BaseImage is the base image, "repo@sha256:<hex>".
	BaseImage string
	// Pool and RenderedConfig name the MachineConfigPool and its rendered
	// MachineConfig; InputHash is the build's input hash (hex).
	Pool, RenderedConfig, InputHash string
	// Layer is the configuration layer, the uncompressed tar Render puts
	// in the build context as rootfs.tar (containerfile.RootfsName); nil when the
	// configuration has no file.
	Layer []byte
	// Spec is the rendered MachineConfig spec: its units and kernel
	// arguments.
	Spec *v1alpha1.MachineConfigSpec
}

// FileAnnotation is the machine-readable part of a file's SPDX entry.
type FileAnnotation struct {
	// Type is "file", "directory", "symlink" or "hardlink".
	Type string `json:"type"`
	// Mode is the permission bits, in octal ("0644"), with setuid, setgid
	// and sticky.
	Mode string `json:"mode"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	// Target is a link's target.
	Target string `json:"target,omitempty"`
}

// ImageAnnotation is the machine-readable summary of the configuration on
// the image's package.
type ImageAnnotation struct {
	Pool           string `json:"pool"`
	RenderedConfig string `json:"renderedConfig"`
	InputHash      string `json:"inputHash"`
	nodeconfig.Summary
}

var hexPattern = regexp.MustCompile(`^[a-f0-9]+$`)

// Generate returns the SPDX 2.3 JSON document of in. An input that is not
// well formed is an error naming the field.
func Generate(in Input) ([]byte, error) {
	image, base, err := check(in)
	if err != nil {
		return nil, err
	}
	summary, err := nodeconfig.Summarize(in.Spec)
	if err != nil {
		return nil, fmt.Errorf("sbom: spec: %w", err)
	}
	entries, err := readLayer(in.Layer)
	if err != nil {
		return nil, fmt.Errorf("sbom: layer: %w", err)
	}

	imageHex := strings.TrimPrefix(in.ImageDigest, "sha256:")
	baseHex := strings.TrimPrefix(base.DigestStr(), "sha256:")
	conf, err := annotation(ImageAnnotationPrefix, ImageAnnotation{
		Pool: in.Pool, RenderedConfig: in.RenderedConfig, InputHash: in.InputHash, Summary: *summary,
	})
	if err != nil {
		return nil, err
	}
	doc := document{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              fmt.Sprintf("%s@%s", image.Name(), in.ImageDigest),
		DocumentNamespace: fmt.Sprintf("https://strata.dev/spdx/%s/%s/%s", url.PathEscape(in.Pool), url.PathEscape(in.RenderedConfig), imageHex),
		CreationInfo: creationInfo{
			Created:  created,
			Creators: []string{tool},
			Comment:  "What Strata added to the image: the configuration layer of rendered MachineConfig " + in.RenderedConfig + " of pool " + in.Pool + ".",
		},
		Packages: []pkg{
			{
				SPDXID:                "SPDXRef-Image",
				Name:                  image.Name(),
				VersionInfo:           in.ImageDigest,
				DownloadLocation:      "NOASSERTION",
				PrimaryPackagePurpose: "CONTAINER",
				Checksums:             []checksum{{Algorithm: "SHA256", Value: imageHex}},
				ExternalRefs:          []externalRef{purl(image, in.ImageDigest)},
				Comment:               "The node OS image Strata built for pool " + in.Pool + ".",
				Annotations:           []spdxAnnotation{conf},
			},
			{
				SPDXID:                "SPDXRef-Base",
				Name:                  base.Context().Name(),
				VersionInfo:           base.DigestStr(),
				DownloadLocation:      "NOASSERTION",
				PrimaryPackagePurpose: "OPERATING_SYSTEM",
				Checksums:             []checksum{{Algorithm: "SHA256", Value: baseHex}},
				ExternalRefs:          []externalRef{purl(base.Context(), base.DigestStr())},
				Comment:               "The base OS image the image was built on.",
			},
		},
		Relationships: []relationship{
			{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: "SPDXRef-Image"},
			{Element: "SPDXRef-Image", Type: "DESCENDANT_OF", Related: "SPDXRef-Base"},
		},
	}
	for i, e := range entries {
		f, err := e.file(fmt.Sprintf("SPDXRef-File-%d", i+1))
		if err != nil {
			return nil, err
		}
		doc.Files = append(doc.Files, f)
		doc.Relationships = append(doc.Relationships, relationship{Element: "SPDXRef-Image", Type: "CONTAINS", Related: f.SPDXID})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// check validates in and parses its image names.
func check(in Input) (name.Repository, name.Digest, error) {
	var errs []error
	image, err := name.NewRepository(in.Image, name.StrictValidation)
	if err != nil || in.Image == "" {
		errs = append(errs, fmt.Errorf("image: %q is not a repository (registry/repository, no tag or digest)", in.Image))
	}
	if !imageref.ValidDigest(in.ImageDigest) {
		errs = append(errs, fmt.Errorf("imageDigest: %q is not sha256:<64 hex digits>", in.ImageDigest))
	}
	base, err := name.NewDigest(in.BaseImage, name.StrictValidation)
	if err != nil {
		errs = append(errs, fmt.Errorf("baseImage: %q is not repository@sha256:<digest>", in.BaseImage))
	}
	if in.Pool == "" {
		errs = append(errs, errors.New("pool: must not be empty"))
	}
	if in.RenderedConfig == "" {
		errs = append(errs, errors.New("renderedConfig: must not be empty"))
	}
	if !hexPattern.MatchString(in.InputHash) {
		errs = append(errs, fmt.Errorf("inputHash: %q is not a hex digest", in.InputHash))
	}
	if len(errs) > 0 {
		return image, base, fmt.Errorf("sbom: %w", errors.Join(errs...))
	}
	return image, base, nil
}

// purl is the package URL of an OCI image (purl-spec's oci type): the
// last path element as name, the digest as version, the full repository
// as repository_url.
func purl(repo name.Repository, digest string) externalRef {
	// The version's ':' is percent-encoded, as purl-spec's examples do;
	// registry and repository names need no encoding.
	loc := fmt.Sprintf("pkg:oci/%s@%s?repository_url=%s",
		path.Base(repo.RepositoryStr()), strings.ReplaceAll(digest, ":", "%3A"), repo.Name())
	return externalRef{Category: "PACKAGE-MANAGER", Type: "purl", Locator: loc}
}

func annotation(prefix string, v any) (spdxAnnotation, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return spdxAnnotation{}, err
	}
	return spdxAnnotation{Date: created, Type: "OTHER", Annotator: tool, Comment: prefix + " " + string(b)}, nil
}

// entry is one tar entry of the configuration layer. A file's content is
// not kept, only what the SBOM says of it, summed as it is read: the
// content may be megabytes, and the controller makes SBOMs of several
// builds at once.
type entry struct {
	path string
	hdr  *tar.Header
	sums sums
}

// sums are a file's checksums and whether it is text (UTF-8 without a
// NUL), or a link's checksums of its target.
type sums struct {
	sha1, sha256 []byte
	text         bool
}

// sumOf sums what r reads.
func sumOf(r io.Reader) (sums, error) {
	h1, h256, tc := sha1.New(), sha256.New(), &textCheck{} //nolint:gosec // see the import
	if _, err := io.Copy(io.MultiWriter(h1, h256, tc), r); err != nil {
		return sums{}, err
	}
	return sums{sha1: h1.Sum(nil), sha256: h256.Sum(nil), text: tc.text()}, nil
}

// textCheck says whether the bytes written to it, together, are what
// utf8.Valid accepts and hold no NUL. A rune cut between two writes is
// carried to the next.
type textCheck struct {
	binary bool
	carry  []byte
}

func (c *textCheck) Write(p []byte) (int, error) {
	n := len(p)
	if c.binary {
		return n, nil
	}
	if bytes.IndexByte(p, 0) >= 0 {
		c.binary = true
		return n, nil
	}
	// Complete the rune the last write cut.
	for len(c.carry) > 0 && len(p) > 0 && !utf8.FullRune(c.carry) {
		c.carry = append(c.carry, p[0])
		p = p[1:]
	}
	if len(c.carry) > 0 {
		if !utf8.FullRune(c.carry) {
			return n, nil // p ran out first
		}
		if !utf8.Valid(c.carry) {
			c.binary = true
			return n, nil
		}
		c.carry = c.carry[:0]
	}
	// Carry a rune that p cuts.
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				c.carry = append(c.carry, p[i:]...)
				p = p[:i]
			}
			break
		}
	}
	if !utf8.Valid(p) {
		c.binary = true
	}
	return n, nil
}

// text is the verdict once everything is written: a rune still cut is
// not UTF-8.
func (c *textCheck) text() bool { return !c.binary && len(c.carry) == 0 }

// readLayer reads every entry of the layer, sorted by path, one per path.
// Directories are listed like files: the layer makes them, with their mode
// and owner. A path the layer names twice is what its last entry makes, as
// when the image is built, so that is the one listed.
func readLayer(layer []byte) ([]entry, error) {
	if len(layer) == 0 {
		return nil, nil
	}
	var out []entry
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		p := path.Clean("/" + hdr.Name)
		if p == "/" {
			continue
		}
		// JSON strings are UTF-8: another name would reach the SBOM
		// with its bytes replaced, naming a file the image lacks.
		if !utf8.ValidString(p) || (hdr.Linkname != "" && !utf8.ValidString(hdr.Linkname)) {
			return nil, fmt.Errorf("%q: a name or link target that is not UTF-8 cannot be written to an SPDX document", p)
		}
		// The content of a file is in the layer, so no larger than it; a
		// sparse entry could claim terabytes of zeros to read.
		if hdr.Size > int64(len(layer)) {
			return nil, fmt.Errorf("%s: claims %d bytes, more than the whole layer (%d)", p, hdr.Size, len(layer))
		}
		var sum sums
		switch hdr.Typeflag {
		case tar.TypeReg:
			sum, err = sumOf(tr)
		case tar.TypeSymlink:
			sum, err = sumOf(strings.NewReader(hdr.Linkname))
		case tar.TypeLink:
			sum, err = sumOf(strings.NewReader(path.Clean("/" + hdr.Linkname)))
		default:
			sum, err = sumOf(bytes.NewReader(nil))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, entry{path: p, hdr: hdr, sums: sum})
	}
	slices.SortStableFunc(out, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	// Stable: of equal paths, the last in the layer comes last; keep it.
	last := out[:0]
	for i, e := range out {
		if i+1 < len(out) && out[i+1].path == e.path {
			continue
		}
		last = append(last, e)
	}
	return last, nil
}

// file is the entry's SPDX file. A file's checksums are of its content, a
// link's of its target, a directory's of nothing: SPDX wants a checksum of
// every file, and the annotation says which it is.
func (e entry) file(id string) (file, error) {
	a := FileAnnotation{
		Mode: fmt.Sprintf("%04o", e.hdr.Mode&0o7777),
		UID:  e.hdr.Uid,
		GID:  e.hdr.Gid,
	}
	fileType := "OTHER"
	switch e.hdr.Typeflag {
	case tar.TypeReg:
		a.Type = "file"
		fileType = "BINARY"
		if e.sums.text {
			fileType = "TEXT"
		}
	case tar.TypeDir:
		a.Type = "directory"
	case tar.TypeSymlink:
		a.Type, a.Target = "symlink", e.hdr.Linkname
	case tar.TypeLink:
		a.Type, a.Target = "hardlink", path.Clean("/"+e.hdr.Linkname)
	default:
		return file{}, fmt.Errorf("sbom: layer: %s: unexpected tar entry type %q", e.path, e.hdr.Typeflag)
	}
	ann, err := annotation(FileAnnotationPrefix, a)
	if err != nil {
		return file{}, err
	}
	comment := fmt.Sprintf("%s, mode %s, owner %d:%d", a.Type, a.Mode, a.UID, a.GID)
	if a.Target != "" {
		comment += ", target " + a.Target
	}
	return file{
		SPDXID:    id,
		FileName:  "." + e.path,
		FileTypes: []string{fileType},
		Checksums: []checksum{
			{Algorithm: "SHA1", Value: hex.EncodeToString(e.sums.sha1)},
			{Algorithm: "SHA256", Value: hex.EncodeToString(e.sums.sha256)},
		},
		LicenseConcluded: "NOASSERTION",
		CopyrightText:    "NOASSERTION",
		Comment:          comment,
		Annotations:      []spdxAnnotation{ann},
	}, nil
}
