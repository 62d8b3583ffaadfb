package bootcsim

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/test/testregistry"
)

// TestBootOverlayIsTheBootableAdditions: an image without a kernel, an
// os-release or a deletion gets, in its image commit, exactly the tree
// that a commit of its own adds (the same checksums throughout), with no
// ostree run to list the image; an image with a kernel or an os-release
// gets the additions as before.
func TestBootOverlayIsTheBootableAdditions(t *testing.T) {
	reg := testregistry.Start(t, "")
	for name, c := range map[string]struct {
		files    map[string]string
		overlaid bool
	}{
		"config layer": {files: map[string]string{"etc/chrony.conf": "a\n", "usr/lib/systemd/system/x.service": "[Unit]\n"}, overlaid: true},
		"kernel":       {files: map[string]string{"usr/lib/modules/5.14.0/vmlinuz": "k\n", "etc/x": "x\n"}},
		"os-release":   {files: map[string]string{"etc/os-release": "ID=custom\n"}},
	} {
		t.Run(name, func(t *testing.T) {
			img, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, c.files))
			if err != nil {
				t.Fatal(err)
			}
			image := reg.Push(t, "strata/overlay:"+strings.ReplaceAll(name, " ", "-"), img)
			trees := map[bool]string{}
			for _, overlay := range []bool{true, false} {
				root := filepath.Join(t.TempDir(), "node")
				t.Cleanup(func() {
					if err := Cleanup(root); err != nil {
						t.Errorf("cleanup: %v", err)
					}
				})
				// An ostree that logs its runs.
				log := filepath.Join(t.TempDir(), "runs")
				wrapper := filepath.Join(t.TempDir(), "ostree")
				if err := os.WriteFile(wrapper, []byte("#!/bin/sh\necho \"$@\" >>"+log+"\nexec ostree \"$@\"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				s := &Sim{Root: root, Ostree: wrapper, noOverlay: !overlay}
				if err := s.Init(context.Background(), image); err != nil {
					t.Fatal(err)
				}
				deps, err := s.deployments()
				if err != nil || len(deps) != 1 {
					t.Fatalf("deployments %+v, %v", deps, err)
				}
				out, err := exec.Command("ostree", "--repo="+s.repo(), "ls", "-R", "-C", deps[0].Checksum).CombinedOutput()
				if err != nil {
					t.Fatalf("ostree ls: %v: %s", err, out)
				}
				trees[overlay] = string(out)
				runs, err := os.ReadFile(log)
				if err != nil {
					t.Fatal(err)
				}
				listed := strings.Contains(string(runs), " ls ")
				if overlay && listed == c.overlaid {
					t.Errorf("with the overlay, ostree listed the image: %t; want %t (runs:\n%s)", listed, !c.overlaid, runs)
				}
				for _, want := range []string{"/usr/lib/os-release", "/usr/etc", "/vmlinuz"} {
					if !strings.Contains(trees[overlay], want) {
						t.Errorf("overlay %t: the deployed tree has no %s", overlay, want)
					}
				}
			}
			if trees[true] != trees[false] {
				t.Errorf("the image commit with the overlay differs from the image with its additions committed apart:\n%s\nvs\n%s", trees[true], trees[false])
			}
		})
	}
}
