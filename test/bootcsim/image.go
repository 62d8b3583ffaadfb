package bootcsim

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/strata-dev/strata/ostreeimage"
)

// simKernelVersion names the dummy kernel added to images without one:
// ostree deploys nothing without a kernel and an initramfs.
const simKernelVersion = "6.0.0-bootcsim"

// defaultOSRelease is the os-release added to images without one.
const defaultOSRelease = "NAME=\"Strata simulated OS\"\nID=strata\nPRETTY_NAME=\"Strata simulated OS\"\n"

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
	// Imports a killed pull left behind; the caller holds the node's lock.
	if err := os.RemoveAll(s.importDir()); err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(s.overlayDir()) }()
	im, err := s.images().Import(ctx, img)
	if err != nil {
		return nil, pullError(image, kc, err)
	}
	csum, err := s.bootable(ctx, im, image)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", image, err)
	}
	info := imageInfo{Digest: im.Digest, Architecture: im.Architecture, Version: im.Version,
		Created: im.Created, Kargs: im.Kargs}
	st.Images[csum] = info
	return &pulledImage{Checksum: csum, Info: info}, nil
}

// images is the node's repository, as bootc imports images into it,
// with the simulator's additions merged into the image commit where they
// are known from the layers alone (bootOverlay).
func (s *Sim) images() ostreeimage.Repo {
	r := ostreeimage.Repo{Path: s.repo(), Ostree: []string{s.ostreeBinary()}, TempDir: s.importDir(), FactsDir: s.factsDir()}
	if !s.noOverlay {
		r.Overlay = s.bootOverlay
	}
	return r
}

func (s *Sim) factsDir() string   { return filepath.Join(s.simDir(), "facts") }
func (s *Sim) overlayDir() string { return filepath.Join(s.simDir(), "overlay") }

func (s *Sim) importDir() string { return filepath.Join(s.simDir(), "import") }

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

// bootable is the commit the simulator deploys for an imported image:
// the image's own, or, when ostree admin deploy would refuse it or the
// simulated status needs more, the image with what a simulated node needs
// added (committed as refPrefix+<digest hex>): a dummy initramfs beside a
// kernel that has none, a dummy kernel and initramfs when the image has no
// kernel, a /usr/lib/os-release (from /usr/etc/os-release), an empty
// /usr/etc. bootc needs none of this for a real bootc image.
func (s *Sim) bootable(ctx context.Context, im *ostreeimage.Image, image string) (string, error) {
	ref := refPrefix + strings.TrimPrefix(im.Digest, "sha256:")
	if im.Overlaid {
		// The image commit has the additions already (bootOverlay).
		return im.Checksum, s.setRef(ref, im.Checksum)
	}
	adds, err := s.bootableAdditions(ctx, im.Checksum)
	if err != nil {
		return "", err
	}
	if adds.none() {
		return im.Checksum, s.setRef(ref, im.Checksum)
	}
	add, err := os.MkdirTemp(s.simDir(), "bootable-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(add) }()
	if err := adds.write(add); err != nil {
		return "", err
	}
	out, err := s.ostree(ctx, "--repo="+s.repo(), "commit", "--branch="+ref, "--parent=none",
		"--tree=ref="+im.Checksum, "--tree=dir="+add, "--subject="+image,
		"--add-metadata-string="+ostreeimage.MetaManifestDigest+"="+im.Digest)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// additions is what the simulator adds to an image for its nodes.
type additions struct {
	// usrEtc: an empty /usr/etc.
	usrEtc bool
	// osRelease is /usr/lib/os-release's content; "" adds none.
	osRelease string
	// initramfs are the kernel versions given a dummy initramfs.
	initramfs []string
	// kernel: a dummy kernel and initramfs (simKernelVersion).
	kernel bool
}

func (a additions) none() bool {
	return !a.usrEtc && a.osRelease == "" && len(a.initramfs) == 0 && !a.kernel
}

// write writes the additions into the directory dir, as a tree to
// commit over the image's.
func (a additions) write(dir string) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	write := func(name, data string) error {
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return err
		}
		return root.WriteFile(name, []byte(data), 0o644)
	}
	if a.usrEtc {
		if err := root.MkdirAll("usr/etc", 0o755); err != nil {
			return err
		}
	}
	if a.osRelease != "" {
		if err := write("usr/lib/os-release", a.osRelease); err != nil {
			return err
		}
	}
	for _, v := range a.initramfs {
		if err := write(path.Join("usr/lib/modules", v, "initramfs.img"), "bootc-sim initramfs\n"); err != nil {
			return err
		}
	}
	if a.kernel {
		base := path.Join("usr/lib/modules", simKernelVersion)
		if err := write(path.Join(base, "vmlinuz"), "bootc-sim kernel\n"); err != nil {
			return err
		}
		if err := write(path.Join(base, "initramfs.img"), "bootc-sim initramfs\n"); err != nil {
			return err
		}
	}
	return nil
}

// bootableAdditions lists what the commit csum lacks for the simulator.
func (s *Sim) bootableAdditions(ctx context.Context, csum string) (additions, error) {
	var a additions
	// Most images have all three: one ostree run.
	dirs, err := s.lsCommit(ctx, csum, "/usr", "/usr/lib", "/usr/etc")
	if err != nil {
		return a, err
	}
	usr, lib, etc := dirs["/usr"], dirs["/usr/lib"], dirs["/usr/etc"]
	_, hasEtc := usr["etc"]
	a.usrEtc = !hasEtc
	if _, ok := lib["os-release"]; !ok {
		a.osRelease = defaultOSRelease
		if etc["os-release"] == '-' {
			if a.osRelease, err = s.ostree(ctx, "--repo="+s.repo(), "cat", csum, "/usr/etc/os-release"); err != nil {
				return a, err
			}
		}
	}
	kernel := false
	if lib["modules"] == 'd' {
		modules, err := s.lsCommit(ctx, csum, "/usr/lib/modules")
		if err != nil {
			return a, err
		}
		for v, typ := range modules["/usr/lib/modules"] {
			if typ != 'd' {
				continue
			}
			dir := "/usr/lib/modules/" + v
			ls, err := s.lsCommit(ctx, csum, dir)
			if err != nil {
				return a, err
			}
			files := ls[dir]
			if _, ok := files["vmlinuz"]; !ok {
				continue
			}
			kernel = true
			if _, ok := files["initramfs.img"]; !ok {
				a.initramfs = append(a.initramfs, v)
			}
		}
	}
	a.kernel = !kernel
	return a, nil
}

// lsCommit lists directories of a commit: dir -> name -> type ('d', '-',
// 'l'); a dir the commit does not have is left out.
func (s *Sim) lsCommit(ctx context.Context, csum string, dirs ...string) (map[string]map[string]byte, error) {
	out, err := s.ostree(ctx, append([]string{"--repo=" + s.repo(), "ls", csum}, dirs...)...)
	if err != nil {
		if !strings.Contains(err.Error(), "No such file or directory") {
			return nil, err
		}
		if len(dirs) == 1 {
			return map[string]map[string]byte{}, nil
		}
		// ostree stops at the first missing one: one at a time.
		all := map[string]map[string]byte{}
		for _, d := range dirs {
			one, err := s.lsCommit(ctx, csum, d)
			if err != nil {
				return nil, err
			}
			maps.Copy(all, one)
		}
		return all, nil
	}
	entries := map[string]map[string]byte{}
	for _, line := range strings.Split(out, "\n") {
		// d00755 0 0 0 /usr/lib ; l00777 0 0 0 /usr/x -> y
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		name := fields[4]
		if slices.Contains(dirs, name) && fields[0][0] == 'd' && entries[name] == nil {
			entries[name] = map[string]byte{}
		}
		if parent := path.Dir(name); slices.Contains(dirs, parent) {
			if entries[parent] == nil {
				entries[parent] = map[string]byte{}
			}
			entries[parent][path.Base(name)] = fields[0][0]
		}
	}
	return entries, nil
}

// setRef points the local ref at csum: a ref is a file of its own under
// refs/heads, which is all `ostree refs --create` writes.
func (s *Sim) setRef(ref, csum string) error {
	file := s.refFile(ref)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return writeFileAtomic(file, []byte(csum+"\n"), 0o644)
}

// layerBootFacts is what a layer holds of what bootableAdditions looks
// at, read from its tar headers.
type layerBootFacts struct {
	// Kernel: entries under usr/lib/modules; OSRelease: an os-release
	// file; Etc: entries under etc or usr/etc; Whiteouts: deletions.
	Kernel, OSRelease, Etc, Whiteouts bool
}

// bootOverlay is the Repo's Overlay: when no layer of the image has a
// kernel, an os-release or a deletion, what bootableAdditions would list
// is known from the layers' headers alone (a dummy kernel and initramfs,
// the default os-release, an empty /usr/etc if no layer has /etc), and
// goes into the image commit itself: no ostree run lists the image and
// none commits the additions (two of the five ostree runs of a stage).
// Otherwise it returns "" and bootable does as before.
func (s *Sim) bootOverlay(ctx context.Context, layers []v1.Layer) (string, error) {
	etc := false
	for _, l := range layers {
		f, err := s.layerBootFacts(ctx, l)
		if err != nil {
			return "", err
		}
		if f.Kernel || f.OSRelease || f.Whiteouts {
			return "", nil
		}
		etc = etc || f.Etc
	}
	dir := s.overlayDir()
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	return dir, additions{usrEtc: !etc, osRelease: defaultOSRelease, kernel: true}.write(dir)
}

// layerBootFacts reads a layer's headers once; the facts are kept by
// diffid (a layer never changes), so the base's layers are not fetched
// again at every stage.
func (s *Sim) layerBootFacts(ctx context.Context, l v1.Layer) (layerBootFacts, error) {
	var f layerBootFacts
	diffID, err := l.DiffID()
	if err != nil {
		return f, err
	}
	file := filepath.Join(s.factsDir(), "boot-"+diffID.Hex)
	if data, err := os.ReadFile(file); err == nil {
		return f, json.Unmarshal(data, &f)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return f, err
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		if err := ctx.Err(); err != nil {
			return f, err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return f, fmt.Errorf("layer %s: %w", diffID, err)
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		switch {
		case strings.HasPrefix(path.Base(name), ".wh."):
			f.Whiteouts = true
		case name == "usr/lib/modules" || strings.HasPrefix(name, "usr/lib/modules/"):
			f.Kernel = true
		case name == "usr/lib/os-release" || name == "etc/os-release" || name == "usr/etc/os-release":
			f.OSRelease, f.Etc = true, true
		case name == "etc" || strings.HasPrefix(name, "etc/") || name == "usr/etc" || strings.HasPrefix(name, "usr/etc/"):
			f.Etc = true
		}
	}
	data, err := json.Marshal(f)
	if err != nil {
		return f, err
	}
	if err := os.MkdirAll(s.factsDir(), 0o755); err != nil {
		return f, err
	}
	return f, writeFileAtomic(file, data, 0o644)
}
