// Package hostfs writes files on the host through a directory descriptor
// of the host's root, so that no path, and no symbolic link on the way,
// can lead outside it, nor through a link a user planted into what that
// user does not own. A directory is looked up one name at a time
// (chase.go), each opened with O_NOFOLLOW relative to the one before; a
// link is read and its target looked up the same way inside the root (an
// absolute link or ".." stops at the host root, as if the daemon were
// chrooted there), and refused, as systemd-tmpfiles refuses it, when it
// is not root's and leads from what its owner owns to what they do not:
// otherwise the owner of /var/lib/app could plant data -> /etc and have
// the daemon chown /etc/systemd for an item under /var/lib/app/data.
// Every change is made with *at calls on the final component relative to
// its parent's descriptor: a parent that exists keeps its owner and
// mode, one the package creates is root's, 0755. Files are replaced
// atomically: a temporary file in the same directory, fsync, rename,
// fsync of the directory. An existing file is read (to compare it with
// an item, append to it, or read /etc/passwd) only if it is a regular
// file of at most maxRead bytes, opened with O_NONBLOCK and checked by
// fstat of what was opened: a FIFO a user put at a managed path would
// otherwise block the daemon forever, and a huge file exhaust it
// (rollout/internal/atfile).
package hostfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/strata-dev/strata/rollout/internal/atfile"
)

// inRoot resolves a path as if the root descriptor were "/"; only reads
// use it (ReadFile), writes look their directory up with chase.
const inRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

// beneathNoLinks opens one name in a directory, refusing any link.
const beneathNoLinks = atfile.BeneathNoLinks

// maxRead bounds what the package reads of one host file (ReadFile, and
// an existing file it compares with an item, appends to, or keeps), so
// that a file made huge at a managed path, or growing while it is read,
// cannot take the daemon's memory: a larger one is refused unread. It
// is well above anything the package is given to write or read: a
// config's files and appends together are at most
// nodeconfig.MaxContentSize (4 MiB), a pull secret at most the 1 MiB of
// a Kubernetes Secret, the signature policy a few KiB, and /etc/passwd
// takes some 100,000 local accounts to reach it. The daemon holds one
// such file at a time, twice for an append.
const maxRead = 16 << 20

// dirMode is the mode of the parent directories the package creates.
const dirMode = 0o755

// Root is an open host root directory.
type Root struct {
	path string
	fd   int
}

// Open opens the host root at dir.
func Open(dir string) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &Root{path: dir, fd: fd}, nil
}

// Close closes the root's descriptor.
func (r *Root) Close() error {
	return unix.Close(r.fd)
}

// Path is the root's path in the daemon's mount namespace.
func (r *Root) Path() string {
	return r.path
}

// rel turns a host path into one relative to the root descriptor.
func rel(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

// split gives a host path's parent and final name; the name is never
// empty, "." or "..".
func split(p string) (string, string, error) {
	clean := path.Clean("/" + p)
	dir, name := path.Split(clean)
	if name == "" || name == "." || name == ".." {
		return "", "", fmt.Errorf("%q has no file name", p)
	}
	return dir, name, nil
}

// ensureDir opens the directory name in dfd, creating it with mode and
// owner when it does not exist. An existing directory keeps its mode and
// owner; a link in its place is refused.
func ensureDir(dfd int, name string, mode uint32, uid, gid int) (int, error) {
	err := unix.Mkdirat(dfd, name, 0o700)
	if err != nil && err != unix.EEXIST {
		return -1, err
	}
	fd, oerr := atfile.Openat2(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0, beneathNoLinks)
	if oerr != nil {
		return -1, oerr
	}
	if err == nil {
		// Created 0700 and opened to fix mode and owner, so the
		// directory is never more open than asked for.
		if err := setOwnerMode(fd, uid, gid, mode); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// setOwnerMode sets an open file's owner and then its mode (chown clears
// set-id bits, so the mode comes last).
func setOwnerMode(fd, uid, gid int, mode uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if int(st.Uid) != uid || int(st.Gid) != gid {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return err
		}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&0o7777 != mode&0o7777 {
		return unix.Fchmod(fd, mode&0o7777)
	}
	return nil
}

// tempName is a fresh name for a temporary file next to name.
func tempName(name string) string {
	return atfile.TempName(atfile.TempPrefix(name, "strata"))
}

// writeAt replaces name in dfd with a file of data, mode and owner,
// atomically.
func writeAt(dfd int, name string, data []byte, mode uint32, uid, gid int) error {
	return atfile.Replace(dfd, name, atfile.TempPrefix(name, "strata"), data, func(fd int) error {
		return setOwnerMode(fd, uid, gid, mode)
	})
}

// openAt opens the regular file name in dfd for reading without
// following a link, as atfile.OpenRegular checks it: a FIFO, a socket, a
// device or a directory is an *atfile.NotRegularError, a file of more
// than maxRead bytes an *atfile.TooLargeError. p is its host path, for
// errors.
func openAt(dfd int, name, p string) (*atfile.File, error) {
	return atfile.OpenRegular(dfd, name, unix.O_NOFOLLOW, beneathNoLinks, p, maxRead)
}

// WriteFile replaces the host file p atomically with data, mode and
// owner, creating missing parent directories (0755, root). A link at p
// itself is replaced, not followed.
func (r *Root) WriteFile(p string, data []byte, mode os.FileMode, uid, gid int) error {
	dir, name, err := split(p)
	if err != nil {
		return err
	}
	dfd, err := r.mkdirAll(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := writeAt(dfd, name, data, unixMode(mode), uid, gid); err != nil {
		return &os.PathError{Op: "write", Path: p, Err: err}
	}
	return nil
}

// OpenDir opens the host directory p for reading, looked up as every
// write of the package looks its directory up (chase): links are
// followed only inside the root and only when systemd-tmpfiles would
// follow them. Other packages that write under a host directory start
// from it.
func (r *Root) OpenDir(p string) (*os.File, error) {
	fd, err := r.openDir(p)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path.Join(r.path, path.Clean("/"+p))), nil
}

// ReadFile reads the host file p, following links only inside the root.
// Only a regular file of at most maxRead bytes is read: anything else is
// an *atfile.NotRegularError (a FIFO would block the read forever) or an
// *atfile.TooLargeError, whose messages name p.
func (r *Root) ReadFile(p string) ([]byte, error) {
	data, err := atfile.ReadFile(r.fd, rel(p), 0, inRoot, p, maxRead)
	// The open's own error is a bare errno, which says no path; the
	// others, which may wrap one, name p already.
	if errno, ok := err.(unix.Errno); ok { //nolint:errorlint // only the bare errno, not one a named error wraps
		return nil, &os.PathError{Op: "open", Path: p, Err: errno}
	}
	return data, err
}

// Remove removes the host file p; a missing file is no error.
func (r *Root) Remove(p string) error {
	dir, name, err := split(p)
	if err != nil {
		return err
	}
	dfd, err := r.openDir(dir)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := unix.Unlinkat(dfd, name, 0); err != nil && err != unix.ENOENT {
		return &os.PathError{Op: "remove", Path: p, Err: err}
	}
	return unix.Fsync(dfd)
}

// unixMode turns an os.FileMode into permission bits with set-id and
// sticky bits.
func unixMode(m os.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		u |= unix.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		u |= unix.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		u |= unix.S_ISVTX
	}
	return u
}
