// Package testhost guards what tests change on the host that several test
// processes share. `go test ./...` runs packages in parallel, and buildah
// run as root always writes its blob info cache to /var/lib/containers/cache:
// a test that removed the cache it created could pull it from under a build
// in another package.
package testhost

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// BuildahCache is where buildah, as root, keeps its blob info cache
// whatever --root says.
const BuildahCache = "/var/lib/containers/cache"

// lockPath is shared by every test process on the machine.
var lockPath = filepath.Join(os.TempDir(), "strata-buildah-tests.lock")

// UseBuildah serialises the tests that run buildah across test processes,
// and removes buildah's blob info cache when the test ends if it was not
// there before, so that the host is left as found even when the test fails.
// Call it before the first buildah command.
func UseBuildah(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("open %s: %v", lockPath, err)
	}
	// flock waits for the other process; the kernel drops the lock if a
	// test process dies, so a crash cannot wedge later runs.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("lock %s: %v", lockPath, err)
	}
	_, statErr := os.Stat(BuildahCache)
	existed := !errors.Is(statErr, os.ErrNotExist)
	t.Cleanup(func() {
		if !existed {
			if err := os.RemoveAll(BuildahCache); err != nil {
				t.Errorf("remove %s: %v", BuildahCache, err)
			}
		}
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
