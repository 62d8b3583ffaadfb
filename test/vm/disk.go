package vm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-dev/strata/bootdisk"
	"github.com/strata-dev/strata/test/testenv"
)

// BaseImage is the bootable base hack/vm/base.sh pushes (make vm-base);
// STRATA_VM_BASE names another.
func BaseImage() string {
	if s := os.Getenv("STRATA_VM_BASE"); s != "" {
		return s
	}
	return "127.0.0.1:5000/strata/vm-base:bookworm"
}

// Disk returns a boot disk of the image ref (a tag or a digest; the
// registry is read over plain HTTP), made by bootdisk.Build and cached
// under .infra/vm/disks by the image's reference by digest (which the
// disk's origin names) and the disk code (diskCodeHash): a VM's disk is
// an overlay of it, so one copy serves every test. It also returns that
// reference.
func Disk(t testing.TB, ref string) (disk, digestRef string) {
	t.Helper()
	img, digestRef := resolve(t, ref)
	dir := filepath.Join(infraVM(t), "disks")
	key := sha256.Sum256([]byte(digestRef + "\n" + diskCodeHash(t)))
	disk = filepath.Join(dir, hex.EncodeToString(key[:12])+".raw")
	if _, err := os.Stat(disk); err == nil {
		// Used now: pruneDisks keeps it.
		now := time.Now()
		_ = os.Chtimes(disk, now, now)
		return disk, digestRef
	}
	pruneDisks(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tmp := disk + ".tmp"
	if err := bootdisk.Build(context.Background(), tmp, bootdisk.Options{Image: img, Reference: digestRef, WorkDir: dir}); err != nil {
		_ = os.Remove(tmp)
		t.Fatalf("boot disk of %s: %v", digestRef, err)
	}
	if err := os.Rename(tmp, disk); err != nil {
		t.Fatal(err)
	}
	t.Logf("boot disk of %s made in %s", digestRef, time.Since(start).Round(time.Second))
	return disk, digestRef
}

// diskCodeHash hashes the sources of the packages that make a disk
// (bootdisk, ostreeimage), so that a cached disk made by other code is
// made again rather than booted: a disk of the same image made before a
// change of the import can lack what today's guest bootc reads.
func diskCodeHash(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, pkg := range []string{"bootdisk", "ostreeimage"} {
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files { // Glob sorts
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
			h.Write(data)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DigestRef returns the image ref (a tag or a digest; the registry is
// read over plain HTTP) by digest, for a test that needs no disk of it.
func DigestRef(t testing.TB, ref string) string {
	t.Helper()
	_, d := resolve(t, ref)
	return d
}

func resolve(t testing.TB, ref string) (v1.Image, string) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatalf("read %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return img, r.Context().Digest(d.String()).String()
}

// pruneDisks removes the cached disks no test used for a day: each base
// build makes a new one (about 350 MB of a sparse 4 GiB file).
func pruneDisks(dir string) {
	old, _ := filepath.Glob(filepath.Join(dir, "*.raw"))
	for _, p := range old {
		if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
			_ = os.Remove(p)
		}
	}
}
