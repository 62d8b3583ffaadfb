package liveapply_test

import (
	"fmt"
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

	"github.com/strata-dev/strata/rollout/liveapply"
)

// readDeadline is how long one Verify of a path may take: it takes
// milliseconds, one blocked on a FIFO never returns.
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

// TestFIFOSwappedInIsRefused is issue 37's finding 7 in the live /etc:
// whoever owns a directory there swaps a file for a FIFO and back, so
// that it is regular when Verify stats it and a FIFO when it opens it.
// A read that opens it without O_NONBLOCK waits for a writer forever.
func TestFIFOSwappedInIsRefused(t *testing.T) {
	host, dir := fakeHost(t)
	image(t, dir, "app/a.conf", "a\n")
	live, other := filepath.Join(dir, "etc/app/a.conf"), filepath.Join(dir, "etc/app/swap")
	put(t, live, "a\n", 0o644)
	if err := syscall.Mkfifo(other, 0o644); err != nil {
		t.Fatal(err)
	}
	// Each copy of the path is one more stat and open for the swap to
	// come between.
	paths := slices.Repeat([]string{"/etc/app/a.conf"}, 20)
	swaps := swapping(t, live, other)
	var refused int
	for i := 0; i < 1000; i++ {
		var ms []liveapply.Mismatch
		var err error
		within(t, "Verify of a file swapped with a FIFO", []string{live, other}, func() {
			ms, err = liveapply.Verify(host, fakeDep, paths)
		})
		if err != nil {
			if !strings.Contains(err.Error(), "/etc/app/a.conf") || !strings.Contains(err.Error(), "FIFO") {
				t.Fatalf("Verify: %v, want an error naming /etc/app/a.conf and the FIFO", err)
			}
			refused++
		}
		for _, m := range ms {
			if m.String() != "/etc/app/a.conf: is a special file, want a file" {
				t.Fatalf("mismatch %v, want none or the FIFO", m)
			}
		}
	}
	t.Logf("%d swaps, %d reads refused a FIFO", swaps(), refused)
}

// TestOversizedFileIsRefused: a live file larger than maxFile is refused
// with an error naming it and the limit, also when it is swapped in
// between the stat and the read, and never read whole into the
// daemon's memory.
func TestOversizedFileIsRefused(t *testing.T) {
	limit := strconv.Itoa(liveapply.MaxFile)
	host, dir := fakeHost(t)
	image(t, dir, "app/a.conf", "a\n")
	live, other := filepath.Join(dir, "etc/app/a.conf"), filepath.Join(dir, "etc/app/swap")
	put(t, other, "", 0o644)
	if err := os.Truncate(other, liveapply.MaxFile+1); err != nil {
		t.Fatal(err)
	}
	refusal := func(err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "/etc/app/a.conf") || !strings.Contains(err.Error(), limit) {
			t.Fatalf("Verify: %v, want an error naming /etc/app/a.conf and the limit %s", err, limit)
		}
	}
	put(t, live, "", 0o644)
	if err := os.Truncate(live, liveapply.MaxFile+1); err != nil {
		t.Fatal(err)
	}
	_, err := liveapply.Verify(host, fakeDep, []string{"/etc/app/a.conf"})
	refusal(err)
	_, err = liveapply.Apply(host, fakeDep, []string{"/etc/app/a.conf"})
	refusal(err)

	put(t, live, "a\n", 0o644)
	// Most Verifys end at the first copy of the path, which half the
	// time is the large file: more of them than above.
	paths := slices.Repeat([]string{"/etc/app/a.conf"}, 20)
	swaps := swapping(t, live, other)
	var refused int
	for i := 0; i < 10000; i++ {
		ms, err := liveapply.Verify(host, fakeDep, paths)
		if err != nil {
			refusal(err)
			refused++
		}
		if s := fmt.Sprint(ms); len(ms) > 0 {
			t.Fatalf("mismatches %s: the file over the limit was read", s)
		}
	}
	t.Logf("%d swaps, %d reads refused the file over the limit", swaps(), refused)
}

// TestOversizedImageFileIsRefused: a file of the image larger than the
// limit is not applied live: a *RefusedError, so that the daemon takes
// the reboot instead, and nothing is written.
func TestOversizedImageFileIsRefused(t *testing.T) {
	host, dir := fakeHost(t)
	image(t, dir, "small.conf", "a\n")
	for _, tree := range []string{"etc", "usr/etc"} {
		p := filepath.Join(dir, fakeDep, tree, "big.conf")
		put(t, p, "", 0o644)
		if err := os.Truncate(p, liveapply.MaxFile+1); err != nil {
			t.Fatal(err)
		}
	}
	_, err := liveapply.Apply(host, fakeDep, []string{"/etc/small.conf", "/etc/big.conf"})
	if re := refusedPath(t, err); re.Path != "/etc/big.conf" || !strings.Contains(re.Reason, strconv.Itoa(liveapply.MaxFile)) {
		t.Errorf("refused %v, want /etc/big.conf refused naming the limit", re)
	}
	if _, err := os.Lstat(filepath.Join(dir, "etc/small.conf")); !os.IsNotExist(err) {
		t.Errorf("/etc/small.conf written before the refusal (%v)", err)
	}
}
