package atfile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func openDir(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestOnlyRegularFilesAreRead: each kind of file a user can make is
// refused with its kind and path named, without blocking (the FIFO) or
// failing to say what it is (the socket cannot be opened at all).
func TestOnlyRegularFilesAreRead(t *testing.T) {
	dir := t.TempDir()
	dfd := openDir(t, dir)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "socket"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, kind := range map[string]string{"fifo": "a FIFO", "socket": "a socket", "dir": "a directory"} {
		_, err := ReadFile(dfd, name, unix.O_NOFOLLOW, BeneathNoLinks, "/host/"+name, 100)
		var nr *NotRegularError
		if !errors.As(err, &nr) || !strings.Contains(err.Error(), "/host/"+name+" is "+kind) {
			t.Errorf("%s: %v, want a *NotRegularError naming it as %s", name, err, kind)
		}
	}
	if b, err := ReadFile(dfd, "file", unix.O_NOFOLLOW, BeneathNoLinks, "/host/file", 10); err != nil || string(b) != "0123456789" {
		t.Errorf("file at the limit: %q, %v", b, err)
	}
	_, err = ReadFile(dfd, "file", unix.O_NOFOLLOW, BeneathNoLinks, "/host/file", 9)
	var tl *TooLargeError
	if !errors.As(err, &tl) || err.Error() != "/host/file is 10 bytes, more than the 9 bytes the daemon reads of it: not read" {
		t.Errorf("file over the limit: %v", err)
	}
}

// TestGrowingFileIsRefused: a file that grows past the limit after it
// was opened is refused, not read on.
func TestGrowingFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	dfd := openDir(t, dir)
	p := filepath.Join(dir, "file")
	if err := os.WriteFile(p, []byte("small"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenRegular(dfd, "file", unix.O_NOFOLLOW, BeneathNoLinks, "/host/file", 10)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.WriteFile(p, []byte("much larger now"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAll()
	var tl *TooLargeError
	if !errors.As(err, &tl) || !strings.Contains(err.Error(), "/host/file grew past 10 bytes") {
		t.Errorf("grown file: %v, want a *TooLargeError", err)
	}
}

// TestReplaceLeavesNoTemporaryFile: a failure after the temporary file
// was made removes it and leaves the old file.
func TestReplaceLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	dfd := openDir(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := Replace(dfd, "f", TempPrefix("f", "test"), []byte("new"), func(int) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Replace: %v, want boom", err)
	}
	if err := Replace(dfd, "f", TempPrefix("f", "test"), []byte("new"), func(fd int) error { return unix.Fchmod(fd, 0o640) }); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "f" {
		t.Errorf("entries %v, want only f", entries)
	}
	fi, err := os.Stat(filepath.Join(dir, "f"))
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "new" || fi.Mode().Perm() != 0o640 {
		t.Errorf("f is %q, %v, %v; want new, 0640", b, fi.Mode(), err)
	}
}
