package ostreeimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Whiteout names of the OCI image layout.
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// layerFlags say what an unpacked layer holds that matters for merging it
// onto the layers below it. They are recorded in the layer commit's
// MetaLayer metadata, so a reused layer is not read again.
type layerFlags struct {
	// Whiteouts: the layer deletes paths of lower layers.
	Whiteouts bool
	// ExternalLinks: the layer hard-links to files it does not hold.
	ExternalLinks bool
	// ImplicitDirs: the layer has entries under directories it has no
	// entry for; unpacked alone, these get mode 0755 and root's owner
	// instead of what the lower layers give them.
	ImplicitDirs bool
	// Etc and UsrEtc: the layer has entries under /etc, or under
	// /usr/etc itself; an image may not have both (bootc reserves
	// /usr/etc for its copy of /etc).
	Etc, UsrEtc bool
}

// mergeable reports whether the layer's tree merged over the lower
// layers' trees is what unpacking the layer onto them gives.
func (f layerFlags) mergeable() bool { return !f.Whiteouts && !f.ExternalLinks && !f.ImplicitDirs }

func (f layerFlags) String() string {
	var words []string
	for _, w := range []struct {
		on   bool
		word string
	}{{f.Whiteouts, "whiteouts"}, {f.ExternalLinks, "external-links"}, {f.ImplicitDirs, "implicit-dirs"},
		{f.Etc, "etc"}, {f.UsrEtc, "usr-etc"}} {
		if w.on {
			words = append(words, w.word)
		}
	}
	return strings.Join(words, " ")
}

func parseLayerFlags(s string) layerFlags {
	words := strings.Fields(s)
	return layerFlags{
		Whiteouts:     slices.Contains(words, "whiteouts"),
		ExternalLinks: slices.Contains(words, "external-links"),
		ImplicitDirs:  slices.Contains(words, "implicit-dirs"),
		Etc:           slices.Contains(words, "etc"),
		UsrEtc:        slices.Contains(words, "usr-etc"),
	}
}

// bootcPath is where bootc stores a layer's path (cleaned, relative to
// the root): /etc goes to /usr/etc, where ostree keeps the image's
// default configuration for its three-way merge; a whiteout of /etc
// follows it.
func bootcPath(name string) string {
	switch {
	case name == "etc" || strings.HasPrefix(name, "etc/"):
		return "usr/" + name
	case name == whiteoutPrefix+"etc":
		return "usr/" + name
	}
	return name
}

// unpack writes the layer tar r into dir (which exists) the way bootc
// stores a layer: entries moved by bootcPath, whiteouts kept as empty
// files (when keepWhiteouts; otherwise r is a flattened image and has
// none), device nodes, fifos and sockets dropped (ostree commits none),
// owners, modes and extended attributes (PAX SCHILY.xattr.) kept.
// Through os.Root, no entry or link lands outside dir.
func unpack(r io.Reader, dir string, keepWhiteouts bool) (layerFlags, error) {
	var flags layerFlags
	root, err := os.OpenRoot(dir)
	if err != nil {
		return flags, err
	}
	defer func() { _ = root.Close() }()
	// Directories the layer has an entry for, and those made for entries
	// under them.
	explicit := map[string]bool{".": true}
	implicit := map[string]bool{}
	var pending [][2]string // hard links whose target was not there yet
	// Directories get their owners and modes after every entry is in,
	// as tar does: a directory only its owner may enter (0700, another
	// uid) must still take its entries when this runs as root without
	// CAP_DAC_OVERRIDE (the boot disk Job's pod).
	dirs := map[string]dirAttrs{}
	var dirOrder []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return flags, fmt.Errorf("read the layer: %w", err)
		}
		orig := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if orig == "." {
			continue
		}
		if orig == ".." || strings.HasPrefix(orig, "../") {
			return flags, fmt.Errorf("layer entry %q is outside the root", h.Name)
		}
		switch {
		case orig == "etc" || strings.HasPrefix(orig, "etc/"):
			flags.Etc = true
		case orig == "usr/etc" || strings.HasPrefix(orig, "usr/etc/"):
			flags.UsrEtc = true
		}
		name := bootcPath(orig)
		base := path.Base(name)
		if strings.HasPrefix(base, whiteoutPrefix) {
			if !keepWhiteouts {
				return flags, fmt.Errorf("flattened image has a whiteout %s", h.Name)
			}
			flags.Whiteouts = true
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink:
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			if !strings.HasPrefix(base, whiteoutPrefix) {
				continue
			}
		default:
			continue
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if explicit[d] || implicit[d] {
				break
			}
			// /usr made only to hold /usr/etc is what bootc requires
			// /usr to be anyway.
			fromEtc := orig == "etc" || strings.HasPrefix(orig, "etc/")
			if d != "usr" || !fromEtc {
				flags.ImplicitDirs = true
			}
			implicit[d] = true
		}
		if parent := path.Dir(name); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return flags, fmt.Errorf("layer entry %s: %w", h.Name, err)
			}
		}
		mode := h.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		switch h.Typeflag {
		case tar.TypeDir:
			explicit[name] = true
			if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return flags, fmt.Errorf("layer entry %s: %w", h.Name, err)
			}
			if _, seen := dirs[name]; !seen {
				dirOrder = append(dirOrder, name)
			}
			dirs[name] = dirAttrs{header: h, mode: mode}
		case tar.TypeReg:
			if strings.HasPrefix(base, whiteoutPrefix) {
				// ostree-ext keeps whiteouts as empty files.
				h.Size, mode = 0, 0o644
			}
			err = writeFile(root, name, tr, h, mode)
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			if strings.HasPrefix(base, whiteoutPrefix) {
				err = writeFile(root, name, strings.NewReader(""), &tar.Header{}, 0o644)
			}
		case tar.TypeSymlink:
			_ = root.Remove(name)
			err = root.Symlink(h.Linkname, name)
			if err == nil {
				err = root.Lchown(name, h.Uid, h.Gid)
			}
		case tar.TypeLink:
			target := bootcPath(path.Clean(strings.TrimPrefix(h.Linkname, "/")))
			if _, lerr := root.Lstat(target); errors.Is(lerr, fs.ErrNotExist) {
				// A flattened image lists upper layers first: the
				// target may come later.
				pending = append(pending, [2]string{target, name})
				continue
			}
			_ = root.Remove(name)
			err = root.Link(target, name)
		default:
			continue
		}
		if err != nil {
			return flags, fmt.Errorf("layer entry %s: %w", h.Name, err)
		}
	}
	for _, l := range pending {
		if _, err := root.Lstat(l[0]); errors.Is(err, fs.ErrNotExist) {
			if !keepWhiteouts {
				return flags, fmt.Errorf("layer entry %s: hard link to /%s, which the image does not have", l[1], l[0])
			}
			// A link to a file of a lower layer: only a flattened tree
			// has it.
			flags.ExternalLinks = true
			continue
		}
		_ = root.Remove(l[1])
		if err := root.Link(l[0], l[1]); err != nil {
			return flags, fmt.Errorf("layer entry %s: %w", l[1], err)
		}
	}
	// Children before parents: a parent's mode may shut out its owner's
	// group and others, never root as owner of what is inside.
	for i := len(dirOrder) - 1; i >= 0; i-- {
		d := dirs[dirOrder[i]]
		if err := setDir(root, dirOrder[i], d.header, d.mode); err != nil {
			return flags, fmt.Errorf("layer entry %s: %w", d.header.Name, err)
		}
	}
	if flags.Etc && flags.UsrEtc {
		return flags, errEtcAndUsrEtc
	}
	return flags, nil
}

// dirAttrs is what a directory entry of a layer sets once the layer's
// entries are all in.
type dirAttrs struct {
	header *tar.Header
	mode   fs.FileMode
}

var errEtcAndUsrEtc = errors.New("the image has both /etc and /usr/etc (bootc container lint: /usr/etc is reserved)")

func setDir(root *os.Root, name string, h *tar.Header, mode fs.FileMode) error {
	if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
		return err
	}
	if err := root.Chmod(name, mode); err != nil {
		return err
	}
	if len(xattrs(h)) == 0 {
		return nil
	}
	d, err := root.Open(name)
	if err != nil {
		return err
	}
	err = setXattrs(d, h)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeFile(root *os.Root, name string, r io.Reader, h *tar.Header, mode fs.FileMode) error {
	// A file of a layer replaces what the same layer had there before
	// (a tar may repeat a path); never write through a link.
	if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
		if err := root.Remove(name); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
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
	if err == nil {
		err = setXattrs(f, h)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// xattrs are the extended attributes a tar header carries.
func xattrs(h *tar.Header) map[string]string {
	var out map[string]string
	for k, v := range h.PAXRecords {
		if name, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = v
		}
	}
	return out
}

func setXattrs(f *os.File, h *tar.Header) error {
	for name, value := range xattrs(h) {
		if err := unix.Fsetxattr(int(f.Fd()), name, []byte(value), 0); err != nil {
			return fmt.Errorf("set extended attribute %s: %w", name, err)
		}
	}
	return nil
}
