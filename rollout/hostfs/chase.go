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

// maxSteps bounds one lookup: the kernel follows at most 40 links, and a
// tree changed behind the walk's back must not keep it going forever.
const (
	maxLinks = 40
	maxSteps = 4096
)

// UnsafeTransitionError is a lookup that a link not owned by root would
// have led from what its owner controls to what they do not (systemd's
// "unsafe path transition", CHASE_SAFE).
type UnsafeTransitionError struct {
	// Path is the host path being looked up.
	Path string
	// From and To are the host paths on either side of the transition,
	// and FromUID and ToUID their owners.
	From, To       string
	FromUID, ToUID uint32
}

func (e *UnsafeTransitionError) Error() string {
	return fmt.Sprintf("unsafe path transition from %s (owned by uid %d) to %s (owned by uid %d) while looking up %s: a link that is not root's may only lead to what its owner owns",
		e.From, e.FromUID, e.To, e.ToUID, e.Path)
}

// danglingError is a lookup that a link on the way sent to a directory
// that does not exist. Directories are only created for the path's own
// components, never for a link's target, so that a link cannot choose
// where the daemon makes directories.
type danglingError struct {
	path, link string
}

func (e *danglingError) Error() string {
	return fmt.Sprintf("%s: the link %s on the way points to a directory that does not exist", e.path, e.link)
}

func (e *danglingError) Unwrap() error { return unix.ENOENT }

// unsafeTransition is systemd's rule: from something root owns, anything
// goes; from something another user owns, only to what that same user
// owns.
func unsafeTransition(from, to *unix.Stat_t) bool {
	return from.Uid != 0 && from.Uid != to.Uid
}

// component is one name still to look up; fromLink marks names that a
// link's target brought in.
type component struct {
	name     string
	fromLink bool
}

func components(p string, fromLink bool) []component {
	var out []component
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, component{name: c, fromLink: fromLink})
		}
	}
	return out
}

// dirStep is a directory the walk is in: its descriptor, its stat and
// its host path (for messages).
type dirStep struct {
	fd   int
	st   unix.Stat_t
	path string
}

// openDir opens the host directory p.
func (r *Root) openDir(p string) (int, error) {
	return r.chase(p, false)
}

// mkdirAll opens the host directory p, creating the components of p that
// are missing with mode 0755 owned by root. Existing directories keep
// their owner and mode.
func (r *Root) mkdirAll(p string) (int, error) {
	return r.chase(p, true)
}

// chase opens the host directory p one component at a time, the way
// systemd's chase() with CHASE_SAFE does it, and RESOLVE_IN_ROOT could
// not: every name is opened with O_NOFOLLOW relative to the directory
// before it, and a link is read and its target looked up the same way,
// inside the root (an absolute target starts again at the root, ".." at
// the root stays there). A link whose owner is not root and differs from
// the owner of the directory holding it, or a link not owned by root
// that leads (absolutely, or by "..") to what its owner does not own, is
// refused with an *UnsafeTransitionError: the owner of /var/lib/app who
// plants data -> /etc must not make the daemon write, chown or chmod in
// /etc. Plain directories are entered whoever owns them: a user cannot
// make a directory of someone else's appear in their own (moving a
// directory needs write access to it), and the daemon itself makes
// root-owned parents in users' directories, as Ignition does.
func (r *Root) chase(p string, create bool) (fd int, err error) {
	p = path.Clean("/" + p)
	var rootSt unix.Stat_t
	if err := unix.Fstat(r.fd, &rootSt); err != nil {
		return -1, &os.PathError{Op: "stat", Path: r.path, Err: err}
	}
	stack := []dirStep{{fd: r.fd, st: rootSt, path: "/"}}
	// The root's descriptor is the Root's; every other one is closed
	// unless it is returned.
	defer func() {
		for _, s := range stack[1:] {
			if s.fd != fd {
				unix.Close(s.fd)
			}
		}
	}()
	pop := func(to int) {
		for len(stack) > to {
			unix.Close(stack[len(stack)-1].fd)
			stack = stack[:len(stack)-1]
		}
	}
	fail := func(err error) (int, error) {
		var pe *os.PathError
		var ue *UnsafeTransitionError
		var de *danglingError
		if errors.As(err, &pe) || errors.As(err, &ue) || errors.As(err, &de) {
			return -1, err
		}
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}

	todo := components(p, false)
	links := 0
	for steps := 0; len(todo) > 0; steps++ {
		if steps > maxSteps {
			return fail(unix.ELOOP)
		}
		c := todo[0]
		top := &stack[len(stack)-1]
		if c.name == ".." {
			todo = todo[1:]
			if len(stack) == 1 {
				continue // ".." at the root is the root, as in RESOLVE_IN_ROOT
			}
			parent := &stack[len(stack)-2]
			if unsafeTransition(&top.st, &parent.st) {
				return fail(&UnsafeTransitionError{Path: p, From: top.path, FromUID: top.st.Uid, To: parent.path, ToUID: parent.st.Uid})
			}
			pop(len(stack) - 1)
			continue
		}
		here := path.Join(top.path, c.name)
		dfd, err := atfile.Openat2(top.fd, c.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0, beneathNoLinks)
		switch {
		case err == nil:
			var st unix.Stat_t
			if err := unix.Fstat(dfd, &st); err != nil {
				unix.Close(dfd)
				return fail(err)
			}
			stack = append(stack, dirStep{fd: dfd, st: st, path: here})
			todo = todo[1:]
			continue
		case errors.Is(err, unix.ENOENT) && c.fromLink:
			return fail(&danglingError{path: p, link: top.path})
		case errors.Is(err, unix.ENOENT) && create:
			dfd, err := ensureDir(top.fd, c.name, dirMode, 0, 0)
			if err != nil {
				return fail(&os.PathError{Op: "mkdir", Path: here, Err: err})
			}
			var st unix.Stat_t
			if err := unix.Fstat(dfd, &st); err != nil {
				unix.Close(dfd)
				return fail(err)
			}
			stack = append(stack, dirStep{fd: dfd, st: st, path: here})
			todo = todo[1:]
			continue
		case !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR):
			return fail(&os.PathError{Op: "open", Path: here, Err: err})
		}
		// Not a directory: a link to follow, or something in the way.
		// The link is pinned by an O_PATH descriptor so that its owner
		// and its target are read from the same inode.
		lfd, err := atfile.Openat2(top.fd, c.name, unix.O_PATH|unix.O_NOFOLLOW, 0, beneathNoLinks)
		if err != nil {
			return fail(&os.PathError{Op: "open", Path: here, Err: err})
		}
		var st unix.Stat_t
		if err := unix.Fstat(lfd, &st); err != nil {
			unix.Close(lfd)
			return fail(err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
		case unix.S_IFDIR:
			// Replaced by a directory since: look again.
			unix.Close(lfd)
			continue
		default:
			unix.Close(lfd)
			return fail(&os.PathError{Op: "open", Path: here, Err: unix.ENOTDIR})
		}
		target, err := readlinkat(lfd, "")
		unix.Close(lfd)
		if err != nil {
			return fail(&os.PathError{Op: "readlink", Path: here, Err: err})
		}
		if links++; links > maxLinks {
			return fail(&os.PathError{Op: "open", Path: here, Err: unix.ELOOP})
		}
		if unsafeTransition(&top.st, &st) {
			return fail(&UnsafeTransitionError{Path: p, From: top.path, FromUID: top.st.Uid, To: here, ToUID: st.Uid})
		}
		if target == "" {
			return fail(&os.PathError{Op: "open", Path: here, Err: unix.ENOENT})
		}
		if strings.HasPrefix(target, "/") {
			if unsafeTransition(&st, &rootSt) {
				return fail(&UnsafeTransitionError{Path: p, From: here, FromUID: st.Uid, To: "/", ToUID: rootSt.Uid})
			}
			pop(1)
		}
		todo = append(components(target, true), todo[1:]...)
	}
	top := stack[len(stack)-1]
	if len(stack) == 1 {
		// The root's own descriptor stays the Root's: hand out a copy.
		dfd, err := atfile.Openat2(r.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0, beneathNoLinks)
		if err != nil {
			return fail(err)
		}
		return dfd, nil
	}
	return top.fd, nil
}
