package liveapply

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/strata-dev/strata/rollout/hostfs"
	"github.com/strata-dev/strata/rollout/internal/atfile"
)

// RefusedError is a path that cannot be applied live. Nothing was
// written: Apply checks every path before it writes any. The caller
// takes the default disruption (a reboot into the staged deployment)
// instead.
type RefusedError struct {
	// Path is the host path as given.
	Path string
	// Reason says why, in a sentence a person can act on.
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s cannot be applied live: %s", e.Path, e.Reason)
}

func refused(p, format string, args ...any) error {
	return &RefusedError{Path: p, Reason: fmt.Sprintf(format, args...)}
}

// CheckPath returns a *RefusedError for a path Apply does not write:
// anything that is not a clean absolute path below /etc.
func CheckPath(p string) error {
	switch {
	case !path.IsAbs(p):
		return refused(p, "not an absolute path")
	case path.Clean(p) != p || strings.ContainsRune(p, 0):
		return refused(p, "not a clean path (it must have no \"..\", \".\", \"//\" or trailing \"/\")")
	case p == "/usr" || strings.HasPrefix(p, "/usr/"):
		return refused(p, "/usr is read-only on an image-mode host and changes only with a new deployment (a reboot)")
	case p == "/etc":
		return refused(p, "/etc itself is not a path a change names")
	case !strings.HasPrefix(p, "/etc/"):
		return refused(p, "only /etc follows the image and can be written live (a /var-bound file is written directly, not through an image)")
	}
	return nil
}

// DeploymentDir is the host path of an ostree deployment, from what bootc
// status reports of it (ostree.stateroot, checksum, deploySerial).
// /sysroot is the physical root on an ostree host (/ostree is a link to
// /sysroot/ostree), and the simulator's node root has the same layout.
func DeploymentDir(stateroot, checksum string, serial int) string {
	return path.Join("/sysroot/ostree/deploy", stateroot, "deploy", checksum+"."+strconv.Itoa(serial))
}

// Change is what Apply did to one path.
type Change struct {
	Path string
	// Action is "written", "linked", "directory", "removed" or
	// "unchanged" (the live path already was as it must be).
	Action string
}

// trees are the open directories one Apply or Verify reads and writes:
// the staged deployment's etc/ and usr/etc/, and the live /etc.
type trees struct {
	staged, pristine, live int
}

func (t *trees) close() {
	for _, fd := range []int{t.staged, t.pristine, t.live} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// open opens the trees of a deployment (a host path, DeploymentDir).
func open(host *hostfs.Root, deployment string) (*trees, error) {
	t := &trees{staged: -1, pristine: -1, live: -1}
	dep, err := host.OpenDir(deployment)
	if err != nil {
		return nil, fmt.Errorf("open the staged deployment: %w", err)
	}
	defer dep.Close()
	if t.staged, err = openDir(int(dep.Fd()), "etc"); err != nil {
		t.close()
		return nil, fmt.Errorf("open the staged deployment's etc: %w", &os.PathError{Op: "open", Path: deployment + "/etc", Err: err})
	}
	if t.pristine, err = openDir(int(dep.Fd()), "usr/etc"); err != nil {
		t.close()
		return nil, fmt.Errorf("open the staged deployment's usr/etc: %w", &os.PathError{Op: "open", Path: deployment + "/usr/etc", Err: err})
	}
	live, err := host.OpenDir("/etc")
	if err != nil {
		t.close()
		return nil, fmt.Errorf("open the live /etc: %w", err)
	}
	// Kept as a bare descriptor, closed by close.
	t.live, err = unix.Dup(int(live.Fd()))
	live.Close()
	if err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// step is one path to apply and what it must become.
type step struct {
	path string
	want entry
}

// Apply writes each of paths (host paths below /etc) into the live /etc
// exactly as the image of the staged deployment at deployment (a host
// path, see DeploymentDir) has it: a file's content, a link's target, a
// directory; owner and mode from the image's /etc (usr/etc), xattrs from
// the deployment's etc (see the package comment); a path the image does
// not have is removed. It checks every path before it writes any and
// returns a *RefusedError (possibly among others, errors.Join) when one
// cannot be applied live: outside /etc, a link on the way, a directory
// in the way, a special file. Files are replaced atomically; missing
// parent directories are made as the image has them. Removals come last,
// deepest first. A node's own modification of a path is overwritten:
// LocalModifications finds those first.
func Apply(host *hostfs.Root, deployment string, paths []string) ([]Change, error) {
	var errs []error
	for _, p := range paths {
		if err := CheckPath(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t, err := open(host, deployment)
	if err != nil {
		return nil, err
	}
	defer t.close()

	steps, err := t.plan(paths)
	if err != nil {
		return nil, err
	}
	var changes []Change
	for _, s := range steps {
		action, err := t.apply(s)
		if err != nil {
			return changes, fmt.Errorf("apply %s live: %w", s.path, err)
		}
		changes = append(changes, Change{Path: s.path, Action: action})
	}
	return changes, nil
}

// plan reads what the image has at each path and refuses
// what cannot be applied, before anything is written. Writes come in
// path order (parents before children), removals after, deepest first.
func (t *trees) plan(paths []string) ([]step, error) {
	var writes, removes []step
	var errs []error
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		s, err := t.check(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s.want.exists {
			writes = append(writes, s)
		} else {
			removes = append(removes, s)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	byPath := func(a, b step) int { return strings.Compare(a.path, b.path) }
	slices.SortFunc(writes, byPath)
	slices.SortFunc(removes, func(a, b step) int { return byPath(b, a) })
	return append(writes, removes...), nil
}

// want is what the live path must be: the image's (usr/etc) type,
// content, link target, mode and owner, which is what ostree's merge
// compares, with the staged etc's xattrs where it has the same type
// there (ostree labelled it for its /etc path), else the image's. A
// link on the way in either tree is ELOOP.
func (t *trees) want(p string) (entry, error) {
	want, err := readIn(t.pristine, p)
	if err != nil {
		return entry{}, fmt.Errorf("read %s in the staged deployment's usr/etc: %w", p, err)
	}
	staged, err := readIn(t.staged, p)
	if err != nil {
		return entry{}, fmt.Errorf("read %s in the staged deployment's etc: %w", p, err)
	}
	if want.exists && staged.exists && staged.typ() == want.typ() {
		want.xattrs = staged.xattrs
	}
	return want, nil
}

func (t *trees) check(p string) (step, error) {
	want, err := t.want(p)
	var tooLarge *atfile.TooLargeError
	switch {
	case errors.Is(err, unix.ELOOP):
		return step{}, refused(p, "the staged deployment has a link in place of one of its parent directories")
	case errors.As(err, &tooLarge):
		return step{}, refused(p, "the image's file has more than %d bytes (%d MiB), the most a file applied live may have", maxFile, maxFile>>20)
	}
	if err != nil {
		return step{}, err
	}
	switch want.typ() {
	case 0, unix.S_IFREG, unix.S_IFLNK, unix.S_IFDIR:
	default:
		return step{}, refused(p, "the image has a special file there")
	}
	// What is live on the way and in place.
	dir, name := splitRel(p)
	pfd, err := openDir(t.live, dir)
	switch {
	case errors.Is(err, unix.ENOENT):
		return step{path: p, want: want}, nil // parents are made as the image has them
	case errors.Is(err, unix.ELOOP):
		return step{}, refused(p, "the live /etc has a link in place of one of its parent directories, which the writer does not follow")
	case errors.Is(err, unix.ENOTDIR):
		return step{}, refused(p, "the live /etc has a file in place of one of its parent directories")
	case err != nil:
		return step{}, fmt.Errorf("open the live parent of %s: %w", p, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR && want.exists && want.typ() != unix.S_IFDIR {
			return step{}, refused(p, "a directory is in its place in the live /etc, where the image has %s", want.kind())
		}
	} else if !errors.Is(err, unix.ENOENT) {
		return step{}, fmt.Errorf("stat the live %s: %w", p, err)
	}
	return step{path: p, want: want}, nil
}

func (t *trees) apply(s step) (string, error) {
	dir, name := splitRel(s.path)
	if !s.want.exists {
		return t.remove(dir, name)
	}
	pfd, err := t.parent(dir)
	if err != nil {
		return "", err
	}
	defer unix.Close(pfd)
	if err := removeTemps(pfd, name); err != nil {
		return "", err
	}
	live, err := readEntry(pfd, name, s.path)
	if err != nil {
		return "", err
	}
	if diffs, _ := differences(&live, &s.want); len(diffs) == 0 {
		return "unchanged", nil
	}
	switch s.want.typ() {
	case unix.S_IFREG:
		return "written", writeFile(pfd, name, &s.want)
	case unix.S_IFLNK:
		return "linked", writeLink(pfd, name, &s.want)
	default:
		return "directory", makeDir(pfd, name, &s.want, live.exists)
	}
}

// parent opens the live parent directory dir (relative to /etc), making
// the missing ones as the image has them, so that they are no local
// modification either.
func (t *trees) parent(dir string) (int, error) {
	fd, err := openDir(t.live, dir)
	if !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	cur, err := unix.Dup(t.live)
	if err != nil {
		return -1, err
	}
	done := "."
	for _, c := range strings.Split(dir, "/") {
		rel := path.Join(done, c)
		next, err := openDir(cur, c)
		if errors.Is(err, unix.ENOENT) {
			var want entry
			if want, err = t.want("/etc/" + rel); err == nil {
				if !want.exists || want.typ() != unix.S_IFDIR {
					err = fmt.Errorf("the image has no directory /etc/%s", rel)
				} else {
					err = makeDir(cur, c, &want, false)
				}
			}
			if err == nil {
				next, err = openDir(cur, c)
			}
		}
		unix.Close(cur)
		if err != nil {
			return -1, fmt.Errorf("parent directory /etc/%s: %w", rel, err)
		}
		cur, done = next, rel
	}
	return cur, nil
}

// tempPrefix starts the names of name's temporary files.
func tempPrefix(name string) string {
	return atfile.TempPrefix(name, "strata-live")
}

// tempName is a fresh name for a temporary file next to name.
func tempName(name string) string {
	return atfile.TempName(tempPrefix(name))
}

// removeTemps removes the temporary files of name that a writer killed
// before its rename left in dfd: left there, each would be a file the
// image does not have, which ostree's merge keeps forever. The daemon
// applies again after a crash, so they go then.
func removeTemps(dfd int, name string) error {
	d, err := unix.Dup(dfd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(d), name)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	prefix := tempPrefix(name)
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && len(n) == len(prefix)+atfile.TempDigits {
			if err := unix.Unlinkat(dfd, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("remove the stale temporary file %s: %w", n, err)
			}
		}
	}
	return nil
}

// setMeta gives an open file (or directory) want's owner, mode and
// xattrs, and removes the xattrs want does not have (such as a label the
// kernel gave the new file). The mode comes after the owner: chown
// clears set-id bits.
func setMeta(fd int, want *entry) error {
	if err := unix.Fchown(fd, int(want.uid), int(want.gid)); err != nil {
		return fmt.Errorf("chown: %w", err)
	}
	if err := unix.Fchmod(fd, want.mode&0o7777); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	return syncXattrs(want.xattrs,
		func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) },
		func(k string, buf []byte) (int, error) { return unix.Fgetxattr(fd, k, buf) },
		func(k string, v []byte) error { return unix.Fsetxattr(fd, k, v, 0) },
		func(k string) error { return unix.Fremovexattr(fd, k) })
}

func syncXattrs(want map[string][]byte, list func([]byte) (int, error), get func(string, []byte) (int, error),
	set func(string, []byte) error, remove func(string) error) error {
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if err := set(k, want[k]); err != nil {
			return fmt.Errorf("set xattr %s: %w", k, err)
		}
	}
	have, err := listXattrs(list, get)
	if err != nil {
		return err
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			if err := remove(k); err != nil {
				return fmt.Errorf("remove xattr %s: %w", k, err)
			}
		}
	}
	return nil
}

// writeFile replaces name in dfd with want, atomically.
func writeFile(dfd int, name string, want *entry) error {
	return atfile.Replace(dfd, name, tempPrefix(name), want.data, func(fd int) error { return setMeta(fd, want) })
}

// writeLink replaces name in dfd with the link want, atomically.
func writeLink(dfd int, name string, want *entry) error {
	tmp := tempName(name)
	if err := unix.Symlinkat(want.target, dfd, tmp); err != nil {
		return err
	}
	err := unix.Fchownat(dfd, tmp, int(want.uid), int(want.gid), unix.AT_SYMLINK_NOFOLLOW)
	if err == nil {
		p := procPath(dfd, tmp)
		err = syncXattrs(want.xattrs,
			func(buf []byte) (int, error) { return unix.Llistxattr(p, buf) },
			func(k string, buf []byte) (int, error) { return unix.Lgetxattr(p, k, buf) },
			func(k string, v []byte) error { return unix.Lsetxattr(p, k, v, 0) },
			func(k string) error { return unix.Lremovexattr(p, k) })
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return err
	}
	return unix.Fsync(dfd)
}

// makeDir makes name in dfd the directory want, replacing a file or link
// in its place. A directory made is 0700 until its mode is set, so it is
// never more open than the image's.
func makeDir(dfd int, name string, want *entry, exists bool) error {
	if exists {
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := unix.Unlinkat(dfd, name, 0); err != nil {
				return err
			}
		}
	}
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	fd, err := openDir(dfd, name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := setMeta(fd, want); err != nil {
		return err
	}
	if err := unix.Fsync(fd); err != nil {
		return err
	}
	return unix.Fsync(dfd)
}

// remove removes name (a file, link or empty directory) from the live
// directory dir; what is not there is already removed.
func (t *trees) remove(dir, name string) (string, error) {
	pfd, err := openDir(t.live, dir)
	if errors.Is(err, unix.ENOENT) {
		return "unchanged", nil
	}
	if err != nil {
		return "", err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return "unchanged", nil
	} else if err != nil {
		return "", err
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		// Its content is in the image's change too, removed before it;
		// what else is in it is the node's own and stays (ENOTEMPTY).
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(pfd, name, flags); err != nil {
		return "", err
	}
	return "removed", unix.Fsync(pfd)
}
