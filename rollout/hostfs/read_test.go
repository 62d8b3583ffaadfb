package hostfs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-dev/strata/nodeconfig"
)

// readDeadline is how long one read of a planted file may take: the
// reads below take milliseconds, one blocked on a FIFO never returns.
const readDeadline = 5 * time.Second

// within runs f and fails the test when it does not return within
// readDeadline. A read blocked on a FIFO is then let go by opening the
// FIFOs for writing (and closing them: the reader sees the end), so
// that the test's directory can be removed.
func within(t *testing.T, what string, fifos []string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return
	case <-time.After(readDeadline):
	}
	release(done, fifos)
	t.Fatalf("%s did not return within %v: it blocks reading a FIFO", what, readDeadline)
}

// release opens each FIFO for writing until done is closed.
func release(done <-chan struct{}, fifos []string) {
	for end := time.Now().Add(readDeadline); time.Now().Before(end); {
		for _, p := range fifos {
			if fd, err := unix.Open(p, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
				unix.Close(fd)
			}
		}
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func mkfifo(t *testing.T, p string, uid, gid int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// sparse makes a file of size bytes that takes no room on the disk.
func sparse(t *testing.T, p string, size int64, uid, gid int) {
	t.Helper()
	write(t, p, "", 0o600)
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// sshDir makes core's ~/.ssh/authorized_keys.d, owned by core, as a user
// who plants something at the managed file has it.
func sshDir(t *testing.T, dir string) string {
	t.Helper()
	kd := filepath.Join(dir, "var/home/core/.ssh/authorized_keys.d")
	if err := os.MkdirAll(kd, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(kd), kd} {
		if err := os.Chown(d, coreUID, coreGID); err != nil {
			t.Fatal(err)
		}
	}
	return kd
}

var coreKeys = nodeconfig.NodeItem{Kind: nodeconfig.NodeSSHAuthorizedKeys, UserName: "core", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAA one"}}

// skippedOne asserts that Apply left exactly one item alone, with a
// sentence that has every one of words.
func skippedOne(t *testing.T, skipped []string, err error, words ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("Apply: %v, want the item skipped", err)
	}
	if len(skipped) != 1 {
		t.Fatalf("skipped %q, want one item", skipped)
	}
	for _, w := range words {
		if !strings.Contains(skipped[0], w) {
			t.Errorf("skipped %q, want it to name %q", skipped[0], w)
		}
	}
}

// TestPlantedFIFOIsRefused is issue 37's finding 7: core owns
// ~/.ssh/authorized_keys.d and makes the managed file a FIFO. A read
// that opens it without O_NONBLOCK waits for a writer forever, and the
// daemon with it.
func TestPlantedFIFOIsRefused(t *testing.T) {
	t.Run("ssh keys", func(t *testing.T) {
		r, dir := newRoot(t)
		fifo := filepath.Join(sshDir(t, dir), SSHKeysFile)
		mkfifo(t, fifo, coreUID, coreGID)
		var skipped []string
		var err error
		within(t, "Apply of core's SSH keys", []string{fifo}, func() { skipped, err = r.Apply([]nodeconfig.NodeItem{coreKeys}) })
		skippedOne(t, skipped, err, "/home/core/.ssh/authorized_keys.d/strata", "FIFO")
		if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
			t.Errorf("the FIFO was not left as it is: %v, %v", fi, err)
		}
	})
	t.Run("ReadFile", func(t *testing.T) {
		r, dir := newRoot(t)
		fifo := filepath.Join(dir, "run/ostree/auth.json")
		mkfifo(t, fifo, 0, 0)
		var err error
		within(t, "ReadFile", []string{fifo}, func() { _, err = r.ReadFile("/run/ostree/auth.json") })
		if err == nil || !strings.Contains(err.Error(), "/run/ostree/auth.json") || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("ReadFile of a FIFO: %v, want an error naming the path and the FIFO", err)
		}
	})
	t.Run("users and groups", func(t *testing.T) {
		r, dir := newRoot(t)
		fifo := filepath.Join(dir, "etc/group")
		if err := os.Remove(fifo); err != nil {
			t.Fatal(err)
		}
		mkfifo(t, fifo, 0, 0)
		var err error
		within(t, "Apply", []string{fifo}, func() { _, err = r.Apply([]nodeconfig.NodeItem{coreKeys}) })
		if err == nil || !strings.Contains(err.Error(), "/etc/group") || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("Apply with /etc/group a FIFO: %v, want an error naming it and the FIFO", err)
		}
	})
}

// TestFIFOSwappedInIsRefused: core swaps the managed file for a FIFO and
// back, as fast as renameat2 goes, so that the file is regular when the
// daemon stats it and a FIFO when it opens it.
func TestFIFOSwappedInIsRefused(t *testing.T) {
	r, dir := newRoot(t)
	appDir := filepath.Join(dir, "var/lib/app")
	if err := os.MkdirAll(appDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(appDir, coreUID, coreGID); err != nil {
		t.Fatal(err)
	}
	conf, other := filepath.Join(appDir, "conf"), filepath.Join(appDir, "swap")
	write(t, conf, "a=1\n", 0o644)
	mkfifo(t, other, coreUID, coreGID)
	// Not overwritten and already as it must be: Apply reads it and
	// sets its owner and mode, and never renames over it. Each of the
	// copies is one more stat and open for the swap to come between.
	item := file("/var/lib/app/conf", "a=1\n", 0o644)
	item.Overwrite = false
	items := slices.Repeat([]nodeconfig.NodeItem{item}, 20)

	swaps := swapping(t, conf, other)
	var refused int
	for i := 0; i < 1000; i++ {
		var skipped []string
		var err error
		within(t, "Apply of a file swapped with a FIFO", []string{conf, other}, func() { skipped, err = r.Apply(items) })
		if err != nil {
			t.Fatalf("Apply: %v, want the item written or skipped", err)
		}
		for _, s := range skipped {
			if !strings.HasPrefix(s, "/var/lib/app/conf: ") {
				t.Fatalf("skipped %q, want it to name /var/lib/app/conf", s)
			}
			if strings.Contains(s, "FIFO") {
				refused++
			}
		}
	}
	t.Logf("%d swaps, %d reads refused a FIFO", swaps(), refused)
}

// swapping exchanges a and b until the test ends, and returns a func
// that stops it and says how many times it did.
func swapping(t *testing.T, a, b string) func() int {
	t.Helper()
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		t.Skipf("renameat2 RENAME_EXCHANGE: %v", err)
	}
	var stop atomic.Bool
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE) == nil {
				n.Add(1)
			}
		}
	}()
	halt := func() int {
		stop.Store(true)
		<-done
		return int(n.Load())
	}
	t.Cleanup(func() { halt() })
	return halt
}

// TestOversizedFileIsRefused: a file larger than any the daemon manages
// is refused, not read whole into the daemon's memory.
func TestOversizedFileIsRefused(t *testing.T) {
	// A file the daemon wrote from a config, and one appended to, must
	// be read back.
	if maxRead < 2*nodeconfig.MaxContentSize {
		t.Fatalf("maxRead %d is not above twice a config's content, %d", maxRead, nodeconfig.MaxContentSize)
	}
	limit := strconv.Itoa(maxRead)
	t.Run("ssh keys", func(t *testing.T) {
		r, dir := newRoot(t)
		big := filepath.Join(sshDir(t, dir), SSHKeysFile)
		sparse(t, big, maxRead+1, coreUID, coreGID)
		skipped, err := r.Apply([]nodeconfig.NodeItem{coreKeys})
		skippedOne(t, skipped, err, "/home/core/.ssh/authorized_keys.d/strata", limit)
		if fi, err := os.Stat(big); err != nil || fi.Size() != maxRead+1 {
			t.Errorf("the file was not left as it is: %v, %v", fi, err)
		}
	})
	t.Run("append", func(t *testing.T) {
		r, dir := newRoot(t)
		sparse(t, filepath.Join(dir, "var/lib/app/log"), maxRead+1, 0, 0)
		item := nodeconfig.NodeItem{Kind: nodeconfig.NodeFile, Path: "/var/lib/app/log", Append: [][]byte{[]byte("more\n")}}
		skipped, err := r.Apply([]nodeconfig.NodeItem{item})
		skippedOne(t, skipped, err, "/var/lib/app/log", limit)
	})
	t.Run("ReadFile", func(t *testing.T) {
		r, dir := newRoot(t)
		sparse(t, filepath.Join(dir, "run/ostree/auth.json"), maxRead+1, 0, 0)
		_, err := r.ReadFile("/run/ostree/auth.json")
		if err == nil || !strings.Contains(err.Error(), "/run/ostree/auth.json") || !strings.Contains(err.Error(), limit) {
			t.Errorf("ReadFile of a file over the limit: %v, want an error naming the path and the limit %s", err, limit)
		}
	})
	t.Run("at the limit", func(t *testing.T) {
		r, dir := newRoot(t)
		sparse(t, filepath.Join(dir, "run/ostree/auth.json"), maxRead, 0, 0)
		b, err := r.ReadFile("/run/ostree/auth.json")
		if err != nil || len(b) != maxRead {
			t.Errorf("ReadFile of a file at the limit: %d bytes, %v", len(b), err)
		}
	})
}

// TestRegularFilesStillRead: the reads that refuse FIFOs and large files
// still read a managed file that is regular, and a missing one is still
// "not exist".
func TestRegularFilesStillRead(t *testing.T) {
	r, dir := newRoot(t)
	kd := sshDir(t, dir)
	write(t, filepath.Join(kd, SSHKeysFile), "ssh-ed25519 AAAA one\n", 0o644)
	if s := apply(t, r, coreKeys); len(s) != 0 {
		t.Fatalf("skipped %q", s)
	}
	check(t, filepath.Join(kd, SSHKeysFile), 0, 0o600, coreUID, coreGID)
	write(t, filepath.Join(dir, "var/lib/app/conf"), "a=1\n", 0o644)
	app := nodeconfig.NodeItem{Kind: nodeconfig.NodeFile, Path: "/var/lib/app/conf", Append: [][]byte{[]byte("b=2\n")}}
	if s := apply(t, r, app); len(s) != 0 {
		t.Fatalf("skipped %q", s)
	}
	if got := content(t, filepath.Join(dir, "var/lib/app/conf")); got != "a=1\nb=2\n" {
		t.Errorf("appended %q", got)
	}
	if _, err := r.ReadFile("/no/such/file"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v, want not exist", err)
	}
}
