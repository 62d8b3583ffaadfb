package liveapply

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/strata-dev/strata/rollout/internal/atfile"
)

// beneathNoLinks resolves a path below a directory descriptor without
// following any link on the way, nor leaving the directory.
const beneathNoLinks = atfile.BeneathNoLinks

// maxFile bounds what is read of one file, in the image's trees and in
// the live /etc, where whoever owns a directory can make a file huge or
// grow it while it is read: a larger one is refused unread. /etc holds
// configuration, and the largest files distributions put there (a
// compiled udev hwdb.bin, some 12 MiB; an SELinux policy, a few MiB) are
// well below it; a file of the image that is larger is not applied live
// (a reboot applies it).
const maxFile = 64 << 20

// entry is one /etc path as a tree has it.
type entry struct {
	exists bool
	// mode is st_mode: the type and the permission bits.
	mode     uint32
	uid, gid uint32
	data     []byte // a regular file's content
	target   string // a link's target
	xattrs   map[string][]byte
}

func (e *entry) typ() uint32 { return e.mode & unix.S_IFMT }

func (e *entry) kind() string {
	if !e.exists {
		return "absent"
	}
	switch e.typ() {
	case unix.S_IFREG:
		return "a file"
	case unix.S_IFLNK:
		return "a link"
	case unix.S_IFDIR:
		return "a directory"
	}
	return "a special file"
}

// openDir opens the directory rel below dirfd, following no link. A link
// anywhere on the way is ELOOP, the last component included (where
// O_NOFOLLOW with O_DIRECTORY says ENOTDIR), so that callers tell a link
// from a file in the way.
func openDir(dirfd int, rel string) (int, error) {
	fd, err := atfile.Openat2(dirfd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0, beneathNoLinks)
	if errors.Is(err, unix.ENOTDIR) {
		// Any link before the last component would have been ELOOP.
		var st unix.Stat_t
		if unix.Fstatat(dirfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return -1, unix.ELOOP
		}
	}
	return fd, err
}

// procPath names name in the directory dfd for the l*xattr calls, which
// have no *at form: the descriptor pins the directory, and the final
// name is not followed.
func procPath(dfd int, name string) string {
	return "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + name
}

// readEntry reads name in dfd without following a link; p is its /etc
// path, for errors. A file is read only if it still is a regular file of
// at most maxFile bytes when it is opened (atfile.OpenRegular): the name
// may be a FIFO by then, which would block the read forever.
func readEntry(dfd int, name, p string) (entry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return entry{}, nil
		}
		return entry{}, err
	}
	e := entry{exists: true, mode: st.Mode, uid: st.Uid, gid: st.Gid}
	var err error
	switch e.typ() {
	case unix.S_IFREG:
		var f *atfile.File
		if f, err = atfile.OpenRegular(dfd, name, unix.O_NOFOLLOW, beneathNoLinks, p, maxFile); err != nil {
			return entry{}, err
		}
		defer f.Close()
		// What was opened and read, not what the name was before.
		fst := f.Stat()
		e.mode, e.uid, e.gid = fst.Mode, fst.Uid, fst.Gid
		if e.data, err = f.ReadAll(); err != nil {
			return entry{}, err
		}
		fd := f.Fd()
		e.xattrs, err = listXattrs(func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) },
			func(k string, buf []byte) (int, error) { return unix.Fgetxattr(fd, k, buf) })
	case unix.S_IFLNK:
		if e.target, err = readlinkat(dfd, name); err != nil {
			return entry{}, err
		}
		p := procPath(dfd, name)
		e.xattrs, err = listXattrs(func(buf []byte) (int, error) { return unix.Llistxattr(p, buf) },
			func(k string, buf []byte) (int, error) { return unix.Lgetxattr(p, k, buf) })
	case unix.S_IFDIR:
		var fd int
		if fd, err = openDir(dfd, name); err != nil {
			return entry{}, err
		}
		defer unix.Close(fd)
		e.xattrs, err = listXattrs(func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) },
			func(k string, buf []byte) (int, error) { return unix.Fgetxattr(fd, k, buf) })
	}
	if err != nil {
		return entry{}, err
	}
	return e, nil
}

func readlinkat(dfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// listXattrs reads every extended attribute through list and get, which
// are the f* or l* calls of one file. A file system without xattrs has
// none.
func listXattrs(list func([]byte) (int, error), get func(string, []byte) (int, error)) (map[string][]byte, error) {
	var names []byte
	for {
		n, err := list(nil)
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list xattrs: %w", err)
		}
		if n == 0 {
			return nil, nil
		}
		names = make([]byte, n)
		n, err = list(names)
		if errors.Is(err, unix.ERANGE) {
			continue // grew since
		}
		if err != nil {
			return nil, fmt.Errorf("list xattrs: %w", err)
		}
		names = names[:n]
		break
	}
	out := map[string][]byte{}
	for _, k := range strings.Split(strings.TrimRight(string(names), "\x00"), "\x00") {
		if k == "" {
			continue
		}
		for {
			n, err := get(k, nil)
			if errors.Is(err, unix.ENODATA) {
				break // removed since
			}
			if err != nil {
				return nil, fmt.Errorf("read xattr %s: %w", k, err)
			}
			v := make([]byte, n)
			n, err = get(k, v)
			if errors.Is(err, unix.ERANGE) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("read xattr %s: %w", k, err)
			}
			out[k] = v[:n]
			break
		}
	}
	return out, nil
}

// differences lists how live differs from want. pins is true when one of
// them is something ostree's /etc merge compares (type, content, link
// target, mode, owner), so that the live path would be a local
// modification; xattrs alone are not (ostree ignores them), but a wrong
// security.selinux label still breaks the services that read the file.
func differences(live, want *entry) (diffs []string, pins bool) {
	diffs = ostreeDifferences(live, want)
	return append(diffs, xattrDifferences(live, want)...), len(diffs) > 0
}

// ostreeDifferences are the differences ostree's /etc merge sees.
func ostreeDifferences(live, want *entry) (diffs []string) {
	if live.exists != want.exists || (live.exists && live.typ() != want.typ()) {
		return []string{fmt.Sprintf("is %s, want %s", live.kind(), want.kind())}
	}
	if !live.exists {
		return nil
	}
	if live.typ() == unix.S_IFREG && !bytes.Equal(live.data, want.data) {
		diffs = append(diffs, fmt.Sprintf("content differs (%d bytes, want %d)", len(live.data), len(want.data)))
	}
	if live.typ() == unix.S_IFLNK && live.target != want.target {
		diffs = append(diffs, fmt.Sprintf("link target %q, want %q", live.target, want.target))
	}
	// A link's mode is always 0777.
	if live.typ() != unix.S_IFLNK && live.mode&0o7777 != want.mode&0o7777 {
		diffs = append(diffs, fmt.Sprintf("mode %04o, want %04o", live.mode&0o7777, want.mode&0o7777))
	}
	if live.uid != want.uid || live.gid != want.gid {
		diffs = append(diffs, fmt.Sprintf("owner %d:%d, want %d:%d", live.uid, live.gid, want.uid, want.gid))
	}
	return diffs
}

// xattrDifferences are the differences of xattrs, which ostree ignores.
func xattrDifferences(live, want *entry) (diffs []string) {
	if !live.exists || !want.exists || live.typ() != want.typ() {
		return nil
	}
	keys := slices.Sorted(maps.Keys(want.xattrs))
	for _, k := range slices.Sorted(maps.Keys(live.xattrs)) {
		if _, ok := want.xattrs[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		lv, lok := live.xattrs[k]
		wv, wok := want.xattrs[k]
		switch {
		case !lok:
			diffs = append(diffs, fmt.Sprintf("xattr %s missing, want %q", k, wv))
		case !wok:
			diffs = append(diffs, fmt.Sprintf("xattr %s = %q, want none", k, lv))
		case !bytes.Equal(lv, wv):
			diffs = append(diffs, fmt.Sprintf("xattr %s = %q, want %q", k, lv, wv))
		}
	}
	return diffs
}

// splitRel turns a checked host path /etc/a/b into the parent "a" (or
// ".") and the name "b", relative to /etc.
func splitRel(p string) (dir, name string) {
	rel := strings.TrimPrefix(p, "/etc/")
	dir, name = path.Split(rel)
	if dir == "" {
		return ".", name
	}
	return strings.TrimSuffix(dir, "/"), name
}

// readIn reads the path rel (below the directory dfd) of a tree, with no
// link on the way. A missing parent, or a file in place of one, means the
// tree does not have the path; a link in place of one is an error.
func readIn(dfd int, p string) (entry, error) {
	dir, name := splitRel(p)
	pfd, err := openDir(dfd, dir)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return entry{}, nil
	case err != nil:
		return entry{}, err
	}
	defer unix.Close(pfd)
	return readEntry(pfd, name, p)
}
