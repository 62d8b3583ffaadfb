package bootcsim

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/strata-dev/strata/ostreeimage"
)

// simKernelVersion names the dummy kernel added to images without one:
// ostree deploys nothing without a kernel and an initramfs.
const simKernelVersion = "6.0.0-bootcsim"

// pulledImage is an image committed into the node's ostree repository.
type pulledImage struct {
	Checksum string
	Info     imageInfo
}

// canonicalReference checks a pull spec and drops the tag of a
// tag+digest reference, as bootc canonicalizes the spec it records.
func canonicalReference(image string) (string, error) {
	if image == "" {
		return "", errors.New("no image given")
	}
	if before, digest, ok := strings.Cut(image, "@"); ok {
		if i := strings.LastIndex(before, ":"); i > strings.LastIndex(before, "/") {
			image = before[:i] + "@" + digest
		}
	}
	if _, err := parseReference(image); err != nil {
		return "", err
	}
	return image, nil
}

// parseReference parses a pull spec; loopback registries are spoken to in
// plain HTTP.
func parseReference(image string) (name.Reference, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, fmt.Errorf("invalid image reference %q: %w", image, err)
	}
	host := ref.Context().RegistryStr()
	hostname := host
	if i := strings.LastIndex(host, ":"); i > strings.LastIndex(host, "]") {
		hostname = host[:i]
	}
	if hostname == "localhost" || hostname == "[::1]" || strings.HasPrefix(hostname, "127.") {
		return name.ParseReference(image, name.Insecure)
	}
	return ref, nil
}

// pull fetches image and commits it as strata/<digest hex>, unless that
// commit is already there (no download then). It records the image's
// metadata in st.
func (s *Sim) pull(ctx context.Context, st *state, image string) (*pulledImage, error) {
	ref, err := parseReference(image)
	if err != nil {
		return nil, err
	}
	if d, ok := ref.(name.Digest); ok {
		if p, err := s.cachedImage(st, d.DigestStr()); p != nil || err != nil {
			return p, err
		}
	}
	kc, err := loadAuth(s.Root)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(s.out(), "Fetching %s\n", image)
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
	if err != nil {
		return nil, pullError(image, kc, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, pullError(image, kc, err)
	}
	if p, err := s.cachedImage(st, digest.String()); p != nil || err != nil {
		return p, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, pullError(image, kc, err)
	}
	info := imageInfo{Digest: digest.String(), Architecture: cfg.Architecture,
		Version: cfg.Config.Labels["org.opencontainers.image.version"]}
	if info.Version == "" {
		info.Version = cfg.Config.Labels["version"]
	}
	if !cfg.Created.IsZero() {
		info.Created = cfg.Created.UTC().Format(time.RFC3339)
	}

	// Trees a killed pull left behind; the caller holds the node's lock.
	stale, _ := filepath.Glob(filepath.Join(s.simDir(), "tree-*"))
	for _, t := range stale {
		_ = os.RemoveAll(t)
	}
	tree, err := os.MkdirTemp(s.simDir(), "tree-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tree) }()
	// The tree's root becomes the deployment's; MkdirTemp made it 0700.
	if err := os.Chmod(tree, 0o755); err != nil {
		return nil, err
	}
	rc := mutate.Extract(img)
	err = extract(rc, tree)
	_ = rc.Close()
	if err != nil {
		return nil, pullError(image, kc, err)
	}
	if info.Kargs, err = prepareTree(tree); err != nil {
		return nil, fmt.Errorf("image %s: %w", image, err)
	}
	out, err := s.ostree(ctx, "--repo="+s.repo(), "commit", "--branch="+refPrefix+digest.Hex,
		"--tree=dir="+tree, "--subject="+image,
		"--add-metadata-string=ostree.manifest-digest="+digest.String())
	if err != nil {
		return nil, err
	}
	csum := strings.TrimSpace(out)
	st.Images[csum] = info
	return &pulledImage{Checksum: csum, Info: info}, nil
}

// cachedImage is the already committed image with that digest, if the
// repository and the state both have it.
func (s *Sim) cachedImage(st *state, digest string) (*pulledImage, error) {
	hex := strings.TrimPrefix(digest, "sha256:")
	csum, ok, err := s.revParse(refPrefix + hex)
	if err != nil || !ok {
		return nil, err
	}
	info, ok := st.Images[csum]
	if !ok || info.Digest != digest {
		return nil, nil
	}
	return &pulledImage{Checksum: csum, Info: info}, nil
}

// pullError says plainly when the registry wants credentials the node
// does not have.
func pullError(image string, kc *authKeychain, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden) {
		if kc.Path == "" {
			return fmt.Errorf("pull %s: the registry requires authentication and the node has no auth file (looked for /%s): %w",
				image, strings.Join(AuthFiles, ", /"), err)
		}
		return fmt.Errorf("pull %s: the registry rejected the credentials of %s: %w", image, kc.Path, err)
	}
	return fmt.Errorf("pull %s: %w", image, err)
}

// extract unpacks a flattened image filesystem (whiteouts already
// applied) into dir. Through os.Root, no entry or link lands outside dir.
// Device nodes, fifos and sockets are skipped: ostree commits none.
func extract(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read image layers: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if name == "." {
			continue
		}
		if name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("image entry %q is outside the root", h.Name)
		}
		if parent := path.Dir(name); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return fmt.Errorf("image entry %s: %w", name, err)
			}
		}
		mode := h.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("image entry %s: %w", name, err)
			}
			err = root.Lchown(name, h.Uid, h.Gid)
			if err == nil {
				err = root.Chmod(name, mode)
			}
		case tar.TypeReg:
			err = writeEntry(root, name, tr, h, mode)
		case tar.TypeSymlink:
			err = root.Symlink(h.Linkname, name)
			if err == nil {
				err = root.Lchown(name, h.Uid, h.Gid)
			}
		case tar.TypeLink:
			err = root.Link(path.Clean(strings.TrimPrefix(h.Linkname, "/")), name)
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("image entry %s: %w", name, err)
		}
	}
}

func writeEntry(root *os.Root, name string, r io.Reader, h *tar.Header, mode fs.FileMode) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		// chown before chmod: chown clears the setuid and setgid bits.
		err = f.Chown(h.Uid, h.Gid)
	}
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// prepareTree makes an unpacked image look like bootc's import of it,
// which ostree admin deploy accepts: /etc moved to /usr/etc, a kernel and
// initramfs under usr/lib/modules/<version>/, a usr/lib/os-release. It
// returns the image's kernel arguments for this host.
func prepareTree(dir string) (kargs []string, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	if err := root.MkdirAll("usr/lib", 0o755); err != nil {
		return nil, err
	}
	etc, err := root.Lstat("etc")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := root.MkdirAll("usr/etc", 0o755); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case !etc.IsDir():
		return nil, errors.New("/etc is not a directory")
	default:
		if _, err := root.Lstat("usr/etc"); err == nil {
			return nil, errors.New("the image has both /etc and /usr/etc (bootc container lint: /usr/etc is reserved)")
		}
		if err := root.Rename("etc", "usr/etc"); err != nil {
			return nil, err
		}
	}
	if err := ensureKernel(root); err != nil {
		return nil, err
	}
	if _, err := root.Lstat("usr/lib/os-release"); errors.Is(err, fs.ErrNotExist) {
		data, rerr := root.ReadFile("usr/etc/os-release")
		if fi, lerr := root.Lstat("usr/etc/os-release"); rerr != nil || lerr != nil || !fi.Mode().IsRegular() {
			data = []byte("NAME=\"Strata simulated OS\"\nID=strata\nPRETTY_NAME=\"Strata simulated OS\"\n")
		}
		if err := root.WriteFile("usr/lib/os-release", data, 0o644); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return ostreeimage.ReadKargs(root.FS(), ostreeimage.HostArch())
}

// ensureKernel adds a dummy initramfs beside a kernel that lacks one, or a
// dummy kernel and initramfs when the image has no kernel.
func ensureKernel(root *os.Root) error {
	if err := root.MkdirAll("usr/lib/modules", 0o755); err != nil {
		return err
	}
	dir, err := root.Open("usr/lib/modules")
	if err != nil {
		return err
	}
	entries, err := dir.ReadDir(-1)
	_ = dir.Close()
	if err != nil {
		return err
	}
	found := false
	for _, e := range entries {
		base := path.Join("usr/lib/modules", e.Name())
		if _, err := root.Lstat(path.Join(base, "vmlinuz")); err != nil {
			continue
		}
		found = true
		if _, err := root.Lstat(path.Join(base, "initramfs.img")); errors.Is(err, fs.ErrNotExist) {
			if err := root.WriteFile(path.Join(base, "initramfs.img"), []byte("bootc-sim initramfs\n"), 0o644); err != nil {
				return err
			}
		}
	}
	if found {
		return nil
	}
	base := path.Join("usr/lib/modules", simKernelVersion)
	if err := root.MkdirAll(base, 0o755); err != nil {
		return err
	}
	if err := root.WriteFile(path.Join(base, "vmlinuz"), []byte("bootc-sim kernel\n"), 0o644); err != nil {
		return err
	}
	return root.WriteFile(path.Join(base, "initramfs.img"), []byte("bootc-sim initramfs\n"), 0o644)
}
