// Package atfile reads and replaces files relative to a directory
// descriptor, for the node daemon's two writers of host files
// (rollout/hostfs and rollout/liveapply).
//
// A read must not let what a user put at a managed path stall or exhaust
// the daemon (issue 37, finding 7). So it opens with O_NONBLOCK, without
// which the open of a FIFO waits for a writer forever; it reads only a
// regular file, judged by fstat of the descriptor it opened, not by a
// stat of the name, which can be swapped for a FIFO in between; and it
// reads no more than a limit the caller states, refusing a larger file
// before reading any of it. A write is a temporary file made with
// O_EXCL next to the file it replaces, set up, fsynced and renamed over
// it.
package atfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// BeneathNoLinks resolves a name below a directory descriptor without
// following any link on the way, nor leaving the directory.
const BeneathNoLinks = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Openat2 is openat2(2) with O_CLOEXEC, tried again when a rename raced
// the lookup (RESOLVE_IN_ROOT and RESOLVE_BENEATH answer EAGAIN then) or
// a signal came.
func Openat2(dirfd int, name string, flags int, mode uint32, resolve uint64) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, name, how)
		if (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && i < 16 {
			continue
		}
		return fd, err
	}
}

// NotRegularError is a file that was not read because it is not a
// regular file: a FIFO would block the read until someone writes to it,
// and a directory, socket or device has no content the daemon manages.
type NotRegularError struct {
	// Path is the file's host path.
	Path string
	// Mode is its st_mode.
	Mode uint32
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file: the daemon reads only regular files", e.Path, typeName(e.Mode))
}

// TooLargeError is a file that was not read because it has more than
// Limit bytes.
type TooLargeError struct {
	// Path is the file's host path.
	Path string
	// Size is its size when it was opened; it is at most Limit when the
	// file grew past the limit while it was read.
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size <= e.Limit {
		return fmt.Sprintf("%s grew past %s while it was read, the most the daemon reads of it: not read", e.Path, sizeText(e.Limit))
	}
	return fmt.Sprintf("%s is %d bytes, more than the %s the daemon reads of it: not read", e.Path, e.Size, sizeText(e.Limit))
}

// sizeText says n in bytes, and in MiB when it is a whole number of them.
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d bytes (%d MiB)", n, n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a link"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	}
	return "a special file"
}

// File is a regular file opened for reading by OpenRegular.
type File struct {
	fd    int
	st    unix.Stat_t
	path  string
	limit int64
}

// OpenRegular opens name in dirfd for reading: openat2 with
// O_RDONLY|O_NONBLOCK and flags (O_NOFOLLOW where a link at name must not
// be followed), resolved with resolve. p is the file's host path, for
// errors. Anything but a regular file is a *NotRegularError, and a file
// of more than limit bytes a *TooLargeError; neither is read. A failed
// open is openat2's errno, as the callers classify it.
//
// O_NONBLOCK is what keeps the open of a FIFO from waiting for a writer;
// a regular file ignores it. A socket cannot be opened at all (ENXIO),
// so for one the name is looked at again with O_PATH, to say what it is.
func OpenRegular(dirfd int, name string, flags int, resolve uint64, p string, limit int64) (*File, error) {
	fd, err := Openat2(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|flags, 0, resolve)
	if errors.Is(err, unix.ENXIO) {
		if pfd, perr := Openat2(dirfd, name, unix.O_PATH|flags, 0, resolve); perr == nil {
			var st unix.Stat_t
			serr := unix.Fstat(pfd, &st)
			unix.Close(pfd)
			if serr == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
				return nil, &NotRegularError{Path: p, Mode: st.Mode}
			}
		}
	}
	if err != nil {
		return nil, err
	}
	f := &File{fd: fd, path: p, limit: limit}
	if err := unix.Fstat(fd, &f.st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	if f.st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &NotRegularError{Path: p, Mode: f.st.Mode}
	}
	if f.st.Size > limit {
		unix.Close(fd)
		return nil, &TooLargeError{Path: p, Size: f.st.Size, Limit: limit}
	}
	return f, nil
}

// Fd is the file's descriptor, for fchown, fchmod and the xattr calls.
func (f *File) Fd() int { return f.fd }

// Stat is the file's fstat when it was opened.
func (f *File) Stat() *unix.Stat_t { return &f.st }

// Close closes the file.
func (f *File) Close() error { return unix.Close(f.fd) }

// ReadAll reads the file from where it is, no more than its limit: one
// that grew past it since it was opened is a *TooLargeError.
func (f *File) ReadAll() ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(fdReader(f.fd), f.limit+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: f.path, Err: err}
	}
	if int64(len(data)) > f.limit {
		return nil, &TooLargeError{Path: f.path, Size: f.st.Size, Limit: f.limit}
	}
	return data, nil
}

// ReadFile is OpenRegular and ReadAll.
func ReadFile(dirfd int, name string, flags int, resolve uint64, p string, limit int64) ([]byte, error) {
	f, err := OpenRegular(dirfd, name, flags, resolve, p, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadAll()
}

// fdReader reads a descriptor that the os package must not take over:
// os.NewFile would try to add a non-blocking one to the poller.
type fdReader int

func (r fdReader) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// TempDigits is the number of random hex digits TempName puts after its
// prefix.
const TempDigits = 12

// TempPrefix starts the names of the temporary files of name, tagged
// with tag (which writer made them): ".name.tag-". A long name is cut so
// that the whole stays below NAME_MAX.
func TempPrefix(name, tag string) string {
	if len(name) > 200 {
		name = name[:200]
	}
	return "." + name + "." + tag + "-"
}

// TempName is a fresh name for a temporary file: prefix and TempDigits
// random hex digits.
func TempName(prefix string) string {
	var b [TempDigits / 2]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Replace replaces name in dfd with a file of data, atomically: a
// temporary file TempName(prefix) made 0600 with O_EXCL (so that nothing
// already there is followed or reused), set up by meta (owner, mode,
// xattrs), fsynced and renamed over name, then dfd fsynced. A link at
// name is replaced, not followed. On failure the temporary file is
// removed. Errors are the system calls' own, which callers classify.
func Replace(dfd int, name, prefix string, data []byte, meta func(fd int) error) error {
	var tmp string
	var fd int
	for i := 0; ; i++ {
		tmp = TempName(prefix)
		var err error
		fd, err = Openat2(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600, BeneathNoLinks)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) || i == 10 {
			return err
		}
	}
	f := os.NewFile(uintptr(fd), tmp)
	done := false
	defer func() {
		if !done {
			f.Close()
			_ = unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := meta(fd); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		return err
	}
	done = true
	return unix.Fsync(dfd)
}
