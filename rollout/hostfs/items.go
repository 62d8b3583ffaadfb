package hostfs

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/strata-dev/strata/nodeconfig"
	"github.com/strata-dev/strata/rollout/internal/atfile"
)

// SSHKeysFile is the file, under a user's ~/.ssh/authorized_keys.d/, that
// holds the keys Strata manages (sshd reads the directory on image-mode
// hosts, as Ignition's and Afterburn's fragments show).
const SSHKeysFile = "strata"

// skipError is an item the host's content keeps Apply from writing: a
// conflict a retry cannot fix, reported rather than returned.
type skipError struct{ msg string }

func (e *skipError) Error() string { return e.msg }

func skipf(format string, args ...any) error {
	return &skipError{msg: fmt.Sprintf(format, args...)}
}

// Apply writes node items under the root, in order, except that hard
// links come last so that their targets exist. It returns the items it
// left alone, one sentence each: an existing item that differs when
// overwrite is false, an unknown user or group, a directory in the way, a
// link in the way of a parent. An error means an item could not be
// written for another reason (permissions, I/O) and Apply should be run
// again; it is idempotent, including appends, which are not repeated
// when the file already ends with them.
func (r *Root) Apply(items []nodeconfig.NodeItem) ([]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	acct, err := r.readAccounts()
	if err != nil {
		return nil, fmt.Errorf("read the host's users and groups: %w", err)
	}
	var skipped []string
	var hard []nodeconfig.NodeItem
	apply := func(it nodeconfig.NodeItem) error {
		err := r.apply(acct, &it)
		var skip *skipError
		if errors.As(err, &skip) {
			skipped = append(skipped, skip.msg)
			return nil
		}
		return err
	}
	for _, it := range items {
		if it.Kind == nodeconfig.NodeLink && it.Hard {
			hard = append(hard, it)
			continue
		}
		if err := apply(it); err != nil {
			return skipped, err
		}
	}
	for _, it := range hard {
		if err := apply(it); err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

func (r *Root) apply(acct *accounts, it *nodeconfig.NodeItem) error {
	if it.Kind != nodeconfig.NodeSSHAuthorizedKeys {
		// Validation refuses these paths; checked again here so that no
		// plan, however it was made, writes /run or the daemon's state.
		if msg := nodeconfig.CheckNodePath(it.Path); msg != "" {
			return skipf("%s: not written: the path %s", it.Path, msg)
		}
		if it.Kind == nodeconfig.NodeLink && it.Hard {
			if msg := nodeconfig.CheckNodePath(it.Target); msg != "" {
				return skipf("%s: not written: the target %s", it.Path, msg)
			}
		}
	}
	var err error
	switch it.Kind {
	case nodeconfig.NodeFile:
		err = r.file(acct, it)
	case nodeconfig.NodeDirectory:
		err = r.directory(acct, it)
	case nodeconfig.NodeLink:
		if it.Hard {
			err = r.hardLink(it)
		} else {
			err = r.symlink(acct, it)
		}
	case nodeconfig.NodeSSHAuthorizedKeys:
		return r.sshKeys(acct, it)
	default:
		return skipf("%s: unknown kind %q", it.Path, it.Kind)
	}
	return classify(it.Path, err)
}

// classify turns errors that come from what is on the host (a file where
// a directory should be, a link loop or a dangling link in a parent, a
// link a user planted, a FIFO or a huge file at the path that is not
// read) into skips, and leaves the others errors: a user who owns a
// directory on the way can keep that item from being written, not the
// rest of the config.
func classify(p string, err error) error {
	var skip *skipError
	var unsafe *UnsafeTransitionError
	var dangling *danglingError
	var notRegular *atfile.NotRegularError
	var tooLarge *atfile.TooLargeError
	switch {
	case err == nil, errors.As(err, &skip):
		return err
	case errors.As(err, &unsafe):
		return skipf("%s: not written: %v", p, unsafe)
	case errors.As(err, &dangling):
		return skipf("%s: not written: %v", p, dangling)
	case errors.As(err, &notRegular):
		return skipf("%s: not written: %v", p, notRegular)
	case errors.As(err, &tooLarge):
		return skipf("%s: not written: %v", p, tooLarge)
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EEXIST),
		errors.Is(err, unix.EISDIR), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENAMETOOLONG),
		errors.Is(err, unix.EMLINK):
		return skipf("%s: not written: %v", p, err)
	}
	return fmt.Errorf("write %s: %w", p, err)
}

// owners resolves an item's user and group; nil means root.
func (a *accounts) owners(it *nodeconfig.NodeItem) (int, int, error) {
	uid, gid := 0, 0
	if u := it.User; u != nil {
		switch {
		case u.ID != nil:
			uid = *u.ID
		case u.Name != "":
			e, ok := a.users[u.Name]
			if !ok {
				return 0, 0, skipf("%s: not written: user %q is not in the host's /etc/passwd", it.Path, u.Name)
			}
			uid = e.UID
		}
	}
	if g := it.Group; g != nil {
		switch {
		case g.ID != nil:
			gid = *g.ID
		case g.Name != "":
			id, ok := a.groups[g.Name]
			if !ok {
				return 0, 0, skipf("%s: not written: group %q is not in the host's /etc/group", it.Path, g.Name)
			}
			gid = id
		}
	}
	return uid, gid, nil
}

func itemMode(it *nodeconfig.NodeItem, def uint32) uint32 {
	if it.Mode == nil {
		return def
	}
	return uint32(*it.Mode) & 0o7777
}

// lstat stats name in dfd without following a link; ok is false when it
// does not exist.
func lstat(dfd int, name string) (unix.Stat_t, bool, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return st, false, nil
	}
	return st, err == nil, err
}

func kind(st *unix.Stat_t) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a link"
	case unix.S_IFREG:
		return "a file"
	}
	return "a special file"
}

// parent opens the parent directory of a host path, creating it.
func (r *Root) parent(p string) (int, string, error) {
	dir, name, err := split(p)
	if err != nil {
		return -1, "", skipf("%s: not written: %v", p, err)
	}
	dfd, err := r.mkdirAll(dir)
	if err != nil {
		return -1, "", err
	}
	return dfd, name, nil
}

// slot is a host path about to be written: its parent directory, opened
// (and created) inside the root, and what is at the path now, not
// following a link.
type slot struct {
	dfd    int
	name   string
	st     unix.Stat_t
	exists bool
}

func (r *Root) slot(p string) (*slot, error) {
	dfd, name, err := r.parent(p)
	if err != nil {
		return nil, err
	}
	st, exists, err := lstat(dfd, name)
	if err != nil {
		unix.Close(dfd)
		return nil, err
	}
	return &slot{dfd: dfd, name: name, st: st, exists: exists}, nil
}

func (s *slot) close() { unix.Close(s.dfd) }

func (r *Root) file(acct *accounts, it *nodeconfig.NodeItem) error {
	uid, gid, err := acct.owners(it)
	if err != nil {
		return err
	}
	mode := itemMode(it, 0o644)
	at, err := r.slot(it.Path)
	if err != nil {
		return err
	}
	defer at.close()
	dfd, name, st, exists := at.dfd, at.name, at.st, at.exists
	regular := exists && st.Mode&unix.S_IFMT == unix.S_IFREG
	if exists && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return skipf("%s: not written: a directory is in its place", it.Path)
	}
	var old []byte
	// The file at the path, when it is regular: read, and given its
	// owner and mode when its content is as it must be.
	var cur *atfile.File
	if regular {
		if cur, err = openAt(dfd, name, it.Path); err != nil {
			return err
		}
		defer cur.Close()
		if old, err = cur.ReadAll(); err != nil {
			return err
		}
	}
	var want []byte
	if it.Replace {
		want = bytes.Join(append([][]byte{it.Contents}, it.Append...), nil)
		if exists && (!regular || !bytes.Equal(old, want)) && !it.Overwrite {
			return skipf("%s: left as it is: it exists (%s) with other content and overwrite is false", it.Path, kind(&st))
		}
	} else {
		if exists && !regular && !it.Overwrite {
			return skipf("%s: left as it is: it is %s and overwrite is false", it.Path, kind(&st))
		}
		// Keep the content and append once: a file that already ends
		// with the appended content got it from an earlier run.
		want = old
		if tail := bytes.Join(it.Append, nil); len(tail) > 0 && !bytes.HasSuffix(old, tail) {
			want = append(append([]byte(nil), old...), tail...)
		}
	}
	if regular && bytes.Equal(old, want) {
		// The file that was read, not whatever has the name now.
		return setOwnerMode(cur.Fd(), uid, gid, mode)
	}
	return writeAt(dfd, name, want, mode, uid, gid)
}

func (r *Root) directory(acct *accounts, it *nodeconfig.NodeItem) error {
	uid, gid, err := acct.owners(it)
	if err != nil {
		return err
	}
	mode := itemMode(it, 0o755)
	at, err := r.slot(it.Path)
	if err != nil {
		return err
	}
	defer at.close()
	dfd, name, st, exists := at.dfd, at.name, at.st, at.exists
	if exists && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if !it.Overwrite {
			return skipf("%s: left as it is: it is %s and overwrite is false", it.Path, kind(&st))
		}
		if err := unix.Unlinkat(dfd, name, 0); err != nil {
			return err
		}
	}
	fd, err := ensureDir(dfd, name, mode, uid, gid)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return setOwnerMode(fd, uid, gid, mode)
}

func (r *Root) symlink(acct *accounts, it *nodeconfig.NodeItem) error {
	uid, gid, err := acct.owners(it)
	if err != nil {
		return err
	}
	at, err := r.slot(it.Path)
	if err != nil {
		return err
	}
	defer at.close()
	dfd, name, st, exists := at.dfd, at.name, at.st, at.exists
	if exists {
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if target, err := readlinkat(dfd, name); err == nil && target == it.Target {
				return unix.Fchownat(dfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
			}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return skipf("%s: not written: a directory is in its place", it.Path)
		}
		if !it.Overwrite {
			return skipf("%s: left as it is: it is %s that differs and overwrite is false", it.Path, kind(&st))
		}
	}
	tmp := tempName(name)
	if err := unix.Symlinkat(it.Target, dfd, tmp); err != nil {
		return err
	}
	if err := unix.Fchownat(dfd, tmp, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return err
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return err
	}
	return unix.Fsync(dfd)
}

func readlinkat(dfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// hardLink links the item's path to its target. A hard link shares its
// target's inode, so the item's owner does not apply.
func (r *Root) hardLink(it *nodeconfig.NodeItem) error {
	tdir, tname, err := split(it.Target)
	if err != nil {
		return skipf("%s: not written: target: %v", it.Path, err)
	}
	tfd, err := r.openDir(tdir)
	if errors.Is(err, unix.ENOENT) {
		return skipf("%s: not written: its target %s does not exist", it.Path, it.Target)
	}
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	tst, ok, err := lstat(tfd, tname)
	if err != nil {
		return err
	}
	if !ok {
		return skipf("%s: not written: its target %s does not exist", it.Path, it.Target)
	}
	if tst.Mode&unix.S_IFMT == unix.S_IFDIR {
		return skipf("%s: not written: its target %s is a directory", it.Path, it.Target)
	}
	at, err := r.slot(it.Path)
	if err != nil {
		return err
	}
	defer at.close()
	dfd, name, st, exists := at.dfd, at.name, at.st, at.exists
	if exists {
		if st.Dev == tst.Dev && st.Ino == tst.Ino {
			return nil
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return skipf("%s: not written: a directory is in its place", it.Path)
		}
		if !it.Overwrite {
			return skipf("%s: left as it is: it is %s that differs and overwrite is false", it.Path, kind(&st))
		}
	}
	tmp := tempName(name)
	if err := unix.Linkat(tfd, tname, dfd, tmp, 0); err != nil {
		return err
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return err
	}
	return unix.Fsync(dfd)
}

// sshKeys writes a user's keys to <home>/.ssh/authorized_keys.d/strata,
// owned by the user, creating .ssh and authorized_keys.d (0700) when
// missing. The home directory must exist: the daemon does not make
// users.
func (r *Root) sshKeys(acct *accounts, it *nodeconfig.NodeItem) error {
	u, ok := acct.users[it.UserName]
	if !ok {
		return skipf("SSH keys of %s: not written: the user is not in the host's /etc/passwd", it.UserName)
	}
	if !path.IsAbs(u.Home) {
		return skipf("SSH keys of %s: not written: home directory %q is not an absolute path", it.UserName, u.Home)
	}
	file := path.Join(u.Home, ".ssh", "authorized_keys.d", SSHKeysFile)
	err := func() error {
		hfd, err := r.openDir(u.Home)
		if errors.Is(err, unix.ENOENT) {
			return skipf("SSH keys of %s: not written: home directory %s does not exist", it.UserName, u.Home)
		}
		if err != nil {
			return err
		}
		defer unix.Close(hfd)
		sfd, err := ensureDir(hfd, ".ssh", 0o700, u.UID, u.GID)
		if err != nil {
			return err
		}
		defer unix.Close(sfd)
		kfd, err := ensureDir(sfd, "authorized_keys.d", 0o700, u.UID, u.GID)
		if err != nil {
			return err
		}
		defer unix.Close(kfd)
		data := []byte(strings.Join(it.SSHAuthorizedKeys, "\n") + "\n")
		// The user owns the directory and can put anything at the
		// file's name: a FIFO or a huge file is refused, a link is
		// replaced, never followed.
		cur, err := openAt(kfd, SSHKeysFile, file)
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP):
		case err != nil:
			return err
		default:
			defer cur.Close()
			old, err := cur.ReadAll()
			if err != nil {
				return err
			}
			if bytes.Equal(old, data) {
				return setOwnerMode(cur.Fd(), u.UID, u.GID, 0o600)
			}
		}
		return writeAt(kfd, SSHKeysFile, data, 0o600, u.UID, u.GID)
	}()
	return classify(file, err)
}
