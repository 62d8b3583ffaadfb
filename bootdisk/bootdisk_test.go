package bootdisk_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-dev/strata/bootdisk"
	"github.com/strata-dev/strata/ostreeimage"
	"github.com/strata-dev/strata/test/testregistry"
)

// debugfs runs a debugfs request on the disk image, read-only: the test
// reads the file system without mounting it.
func debugfs(t *testing.T, disk, request string) string {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", request, disk).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs -R %q: %v: %s", request, err, out)
	}
	// debugfs prints its version banner on stderr first.
	_, rest, _ := strings.Cut(string(out), "\n")
	return rest
}

func TestBuild(t *testing.T) {
	reg := testregistry.Start(t, "")
	img, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, map[string]string{
		"usr/lib/modules/6.1.0-test/vmlinuz":       "kernel",
		"usr/lib/modules/6.1.0-test/initramfs.img": "initramfs",
		"usr/lib/os-release":                       "ID=strata-test\nPRETTY_NAME=\"Strata test\"\n",
		"etc/hello":                                "from the image\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Push(t, "os/disk:latest", img)
	d, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(d, remote.WithAuth(reg.Auth()))
	if err != nil {
		t.Fatal(err)
	}

	disk := filepath.Join(t.TempDir(), "disk.raw")
	err = bootdisk.Build(context.Background(), disk, bootdisk.Options{
		Image: pulled, Reference: ref, Kargs: []string{"strata.test=1"}, Size: 256 << 20, WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}

	cfg := debugfs(t, disk, "cat /boot/loader/syslinux.cfg")
	m := regexp.MustCompile(`(?m)^\s*APPEND (.*)$`).FindStringSubmatch(cfg)
	if m == nil {
		t.Fatalf("syslinux.cfg has no APPEND line:\n%s", cfg)
	}
	if want := "root=/dev/vda rw console=ttyS0 strata.test=1 ostree=/ostree/boot.1/" + bootdisk.Stateroot + "/"; !strings.HasPrefix(m[1], want) {
		t.Errorf("kernel command line %q, want it to start with %q", m[1], want)
	}
	if k := regexp.MustCompile(`(?m)^\s*KERNEL (\S+)$`).FindStringSubmatch(cfg); k == nil ||
		!strings.HasSuffix(k[1], "/vmlinuz-6.1.0-test") ||
		!strings.Contains(debugfs(t, disk, "cat "+k[1]), "kernel") {
		t.Errorf("syslinux.cfg's KERNEL is not the image's kernel on the disk:\n%s", cfg)
	}

	dir := "/ostree/deploy/" + bootdisk.Stateroot + "/deploy"
	deploys := regexp.MustCompile(`/([0-9a-f]{64}\.0)/`).FindAllStringSubmatch(debugfs(t, disk, "ls -p "+dir), -1)
	if len(deploys) != 1 {
		t.Fatalf("want one deployment in %s, got %v", dir, deploys)
	}
	dep := dir + "/" + deploys[0][1]
	if got, want := debugfs(t, disk, "cat "+dep+".origin"), (ostreeimage.Origin{Image: ref}).String(); got != want {
		t.Errorf("origin file %q, want %q", got, want)
	}
	if got := debugfs(t, disk, "cat "+dep+"/etc/hello"); got != "from the image\n" {
		t.Errorf("deployment's /etc/hello is %q", got)
	}
	if got := debugfs(t, disk, "stat "+dep+"/bin/busybox"); !strings.Contains(got, "User:     0") {
		t.Errorf("busybox is not root's on the disk:\n%s", got)
	}
}

func TestBuildRefusesAReferenceThatIsNotTheImage(t *testing.T) {
	img := testregistry.Busybox(t)
	other, err := mutate.AppendLayers(img, testregistry.FilesLayer(t, map[string]string{"x": "y"}))
	if err != nil {
		t.Fatal(err)
	}
	od, err := other.Digest()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, ref, want string }{
		{"by tag", "127.0.0.1:5000/os:latest", "not by digest"},
		{"another image", "127.0.0.1:5000/os@" + od.String(), "does not name the image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := bootdisk.Build(context.Background(), filepath.Join(t.TempDir(), "disk.raw"), bootdisk.Options{Image: img, Reference: tc.ref})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
