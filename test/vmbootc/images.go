package vmbootc

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/ostreeimage"
)

// Image is an image committed into the sysroot's repository: the shape
// of package ostreeimage's Image (issue 22, helper B), which replaces
// LocalImporter once it is on main.
type Image struct {
	// Checksum is the ostree commit of the whole image.
	Checksum string
	// Digest is the manifest digest, sha256:....
	Digest string
	// Version is the image's org.opencontainers.image.version label.
	Version string
	// Created is the image's creation time, RFC 3339 in UTC.
	Created string
	// Architecture is the image's architecture (amd64).
	Architecture string
	// Kargs are the image's usr/lib/bootc/kargs.d arguments for this
	// machine's architecture.
	Kargs []string
}

// Importer commits pulled images into the sysroot's repository, as
// bootc's ostree-ext does.
type Importer interface {
	// Import commits img, or finds it committed already.
	Import(ctx context.Context, img v1.Image) (*Image, error)
	// Lookup finds the committed image of a manifest digest.
	Lookup(ctx context.Context, digest string) (*Image, bool, error)
	// RemoveUnused forgets the images whose digests are not in keep, so
	// that ostree's next prune removes what only they used.
	RemoveUnused(ctx context.Context, keep []string) error
}

// Commit metadata keys. ostree.manifest-digest is ostree-ext's (bootc
// reads the digest from it); version is ostree's own (ostree admin status
// prints it); the others are this importer's.
const (
	metaDigest  = "ostree.manifest-digest"
	metaVersion = "version"
	metaCreated = "strata.image.created"
	metaArch    = "strata.image.architecture"
	// imageRefPrefix names an imported image's commit by its digest.
	imageRefPrefix = "strata/image/"
	kargsDir       = "usr/lib/bootc/kargs.d"
)

// LocalImporter is the minimal import this package uses until package
// ostreeimage is on main: the image's flattened filesystem committed in
// one go (ostree commit --tree=tar from a pipe), /etc moved to /usr/etc
// on the way, as bootc's import does. No layer is reused.
type LocalImporter struct {
	// Repo is the ostree repository.
	Repo string
	// Ostree is the ostree command.
	Ostree []string
}

var _ Importer = (*LocalImporter)(nil)

// Import commits img as strata/image/<digest hex>.
func (l *LocalImporter) Import(ctx context.Context, img v1.Image) (*Image, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	if got, ok, err := l.Lookup(ctx, digest.String()); ok || err != nil {
		return got, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	im := &Image{Digest: digest.String(), Architecture: cfg.Architecture,
		Version: cfg.Config.Labels["org.opencontainers.image.version"]}
	if !cfg.Created.IsZero() {
		im.Created = cfg.Created.UTC().Format(time.RFC3339)
	}

	argv := append(append([]string(nil), l.Ostree[1:]...), "commit", "--repo="+l.Repo,
		"--branch="+imageRefPrefix+digest.Hex, "--tree=tar=/dev/stdin", "--tar-autocreate-parents",
		`--tar-pathname-filter=^(\./)?etc(/|$),usr/etc\2`,
		"--add-metadata-string="+metaDigest+"="+im.Digest,
		"--add-metadata-string="+metaCreated+"="+im.Created,
		"--add-metadata-string="+metaArch+"="+im.Architecture)
	if im.Version != "" {
		argv = append(argv, "--add-metadata-string="+metaVersion+"="+im.Version)
	}
	// The kernel arguments are read from the stream on its way to ostree.
	cmd := exec.CommandContext(ctx, l.Ostree[0], argv...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	rc := mutate.Extract(img)
	files, readErr := readKargsFiles(io.TeeReader(rc, stdin))
	_ = rc.Close()
	_ = stdin.Close()
	waitErr := cmd.Wait()
	if readErr != nil {
		return nil, fmt.Errorf("read image %s: %w", im.Digest, readErr)
	}
	if waitErr != nil {
		return nil, fmt.Errorf("ostree commit of image %s: %w: %s", im.Digest, waitErr, strings.TrimSpace(stderr.String()))
	}
	im.Checksum = strings.TrimSpace(stdout.String())
	if im.Kargs, err = kargsOf(files); err != nil {
		return nil, fmt.Errorf("image %s: %w", im.Digest, err)
	}
	return im, nil
}

// Lookup finds the image committed as strata/image/<digest hex>.
func (l *LocalImporter) Lookup(ctx context.Context, digest string) (*Image, bool, error) {
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hex) != 64 {
		return nil, false, fmt.Errorf("invalid digest %q", digest)
	}
	csum, err := os.ReadFile(path.Join(l.Repo, "refs", "heads", imageRefPrefix+hex))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	im, err := describeCommit(ctx, l.Ostree, l.Repo, strings.TrimSpace(string(csum)), true)
	if err != nil {
		return nil, false, err
	}
	if im.Digest != digest {
		return nil, false, nil
	}
	return im, true, nil
}

// RemoveUnused deletes the strata/image refs of the images not in keep.
func (l *LocalImporter) RemoveUnused(ctx context.Context, keep []string) error {
	entries, err := os.ReadDir(path.Join(l.Repo, "refs", "heads", imageRefPrefix))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var unused []string
	for _, e := range entries {
		if !e.IsDir() && !slices.Contains(keep, "sha256:"+e.Name()) {
			unused = append(unused, imageRefPrefix+e.Name())
		}
	}
	if len(unused) == 0 {
		return nil
	}
	_, err = runOstree(ctx, l.Ostree, append([]string{"refs", "--repo=" + l.Repo, "--delete"}, unused...)...)
	return err
}

// describeCommit reads an image commit's metadata, and with kargs its
// kargs.d arguments.
func describeCommit(ctx context.Context, ostree []string, repo, csum string, kargs bool) (*Image, error) {
	meta, err := commitMetadata(ctx, ostree, repo, csum)
	if err != nil {
		return nil, err
	}
	im := imageOfCommit(csum, meta)
	if !kargs {
		return im, nil
	}
	files, err := commitKargsFiles(ctx, ostree, repo, csum)
	if err != nil {
		return nil, err
	}
	if im.Kargs, err = kargsOf(files); err != nil {
		return nil, fmt.Errorf("commit %s: %w", csum, err)
	}
	return im, nil
}

// metadataString is a string key of a commit's metadata, "" when the
// commit does not have it.
func metadataString(ctx context.Context, ostree []string, repo, csum, key string) (string, error) {
	meta, err := commitMetadata(ctx, ostree, repo, csum)
	return meta[key], err
}

// commitKargsFiles reads a commit's usr/lib/bootc/kargs.d/*.toml files.
func commitKargsFiles(ctx context.Context, ostree []string, repo, csum string) (map[string][]byte, error) {
	dir := "/" + kargsDir
	argv := append(append([]string(nil), ostree[1:]...), "ls", "--repo="+repo, "--nul-filenames-only", csum, dir)
	cmd := exec.CommandContext(ctx, ostree[0], argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "No such file or directory") {
			return nil, nil
		}
		return nil, fmt.Errorf("ostree ls %s %s: %w: %s", csum, dir, err, strings.TrimSpace(stderr.String()))
	}
	files := map[string][]byte{}
	for _, name := range strings.Split(stdout.String(), "\x00") {
		if path.Dir(name) != dir || !strings.HasSuffix(name, ".toml") {
			continue
		}
		data, err := runOstree(ctx, ostree, "cat", "--repo="+repo, csum, name)
		if err != nil {
			return nil, err
		}
		files[path.Base(name)] = []byte(data)
	}
	return files, nil
}

// parseGVariantString reads a GVariant text-format string, as ostree show
// prints one: 'text' with backslash escapes.
func parseGVariantString(s string) (string, error) {
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') || s[len(s)-1] != s[0] {
		return "", fmt.Errorf("not a GVariant string: %q", s)
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'u':
			var r rune
			if i+4 < len(s) {
				if _, err := fmt.Sscanf(s[i+1:i+5], "%04x", &r); err == nil {
					b.WriteRune(r)
					i += 4
					continue
				}
			}
			b.WriteByte('u')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// readKargsFiles reads a flattened image filesystem to its end and
// returns its usr/lib/bootc/kargs.d/*.toml files by name.
func readKargsFiles(r io.Reader) (map[string][]byte, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if h.Typeflag == tar.TypeReg && path.Dir(name) == kargsDir && strings.HasSuffix(name, ".toml") {
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			files[path.Base(name)] = data
		}
	}
	// The tar end leaves padding the reader did not need: ostree reads
	// the stream to its end.
	_, err := io.Copy(io.Discard, r)
	return files, err
}

// kargsOf is bootc's reading of kargs.d: the files in name order, those
// that apply to this machine's architecture.
func kargsOf(files map[string][]byte) ([]string, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var kargs []string
	for _, n := range names {
		f, err := ostreeimage.ParseKargsFile(files[n])
		if err != nil {
			return nil, fmt.Errorf("parsing /%s/%s: %w", kargsDir, n, err)
		}
		if f.Applies(ostreeimage.HostArch()) {
			kargs = append(kargs, f.Kargs...)
		}
	}
	return kargs, nil
}

// deploymentKargs reads the kargs.d arguments of a deployed image from
// its deployment directory.
func deploymentKargs(dir string) ([]string, error) {
	entries, err := os.ReadDir(path.Join(dir, kargsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".toml") {
			continue
		}
		data, err := os.ReadFile(path.Join(dir, kargsDir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = data
	}
	return kargsOf(files)
}

// MergeKargs is bootc's rule for a new deployment's kernel arguments: the
// booted ones, less those the booted image had and the new one does not,
// plus those the new image has and the booted one did not. Arguments set
// locally on the machine stay.
func MergeKargs(booted, oldImage, newImage []string) []string {
	var out []string
	for _, k := range booted {
		if slices.Contains(oldImage, k) && !slices.Contains(newImage, k) {
			continue
		}
		out = append(out, k)
	}
	for _, k := range newImage {
		if !slices.Contains(oldImage, k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
