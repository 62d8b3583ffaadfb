package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	corev1 "k8s.io/api/core/v1"

	"github.com/strata-dev/strata/builder/diskjob"
	"github.com/strata-dev/strata/internal/diskartifact"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/test/testregistry"
)

// TestMain lets the tests run this test binary as the program, the way
// the pod runs strata-bootdisk, under a capability set of their choosing.
func TestMain(m *testing.M) {
	if os.Getenv("STRATA_BOOTDISK_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stderr))
	}
	os.Exit(m.Run())
}

// special are files whose owners and modes a disk made without the right
// capabilities gets wrong: other owners, setuid, setgid of another group,
// directories only their owner may read.
var special = []struct {
	name     string
	uid, gid int
	mode     int64
	dir      bool
}{
	{"usr/bin/", 0, 0, 0o755, true},
	{"usr/bin/setuid", 0, 0, 0o4755, false},
	{"usr/bin/setgid", 0, 5, 0o2755, false},
	{"usr/share/private/", 1000, 1000, 0o700, true},
	{"usr/share/private/file", 1000, 1000, 0o400, false},
}

// bootableImage is busybox with a kernel and an initramfs where bootc
// keeps them (ostree's deploy needs them, not their content), an
// os-release, and the special files.
func bootableImage(t *testing.T, reg *testregistry.Registry) string {
	t.Helper()
	img, err := mutate.AppendLayers(testregistry.Busybox(t),
		testregistry.FilesLayer(t, map[string]string{
			"usr/lib/modules/6.1.0-test/vmlinuz":       "kernel",
			"usr/lib/modules/6.1.0-test/initramfs.img": "initramfs",
			"usr/lib/os-release":                       "ID=strata-test\n",
			"etc/strata/hello":                         "from the image\n",
		}),
		testregistry.TarLayer(t, func(tw *tar.Writer) error {
			for _, f := range special {
				h := &tar.Header{Name: f.name, Uid: f.uid, Gid: f.gid, Mode: f.mode, Typeflag: tar.TypeReg, Size: 2}
				if f.dir {
					h.Typeflag, h.Size = tar.TypeDir, 0
				}
				if err := tw.WriteHeader(h); err != nil {
					return err
				}
				if !f.dir {
					if _, err := tw.Write([]byte("x\n")); err != nil {
						return err
					}
				}
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return reg.Push(t, "strata/os-worker:build-1", img)
}

// TestPodCapabilities runs the program as the boot disk pod does: root
// with only diskjob.Capabilities (setpriv's bounding set, no new
// privileges). The disk keeps every owner and mode; and each of CHOWN,
// DAC_READ_SEARCH and FSETID is needed: without it the disk fails or
// loses a setgid bit.
func TestPodCapabilities(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatal("setpriv (util-linux) is needed to run the program with the pod's capabilities")
	}
	reg := testregistry.Start(t, password)
	image := bootableImage(t, reg)
	auth := authFile(t, reg, password)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// withCaps runs the program with caps and returns the report and log.
	withCaps := func(t *testing.T, caps []corev1.Capability) (diskjob.Report, string) {
		bound := "-all"
		for _, c := range caps {
			bound += ",+" + strings.ToLower(string(c))
		}
		work, term := t.TempDir(), filepath.Join(t.TempDir(), "termination-log")
		cmd := exec.Command("setpriv", "--bounding-set="+bound, "--inh-caps=-all", "--no-new-privs", "--", self,
			"--image="+image, "--size-mib=512", "--auth-file="+auth, "--insecure-registry="+reg.Host, "--work-dir="+work, "--termination-log="+term)
		cmd.Env = append(os.Environ(), "STRATA_BOOTDISK_MAIN=1", "TMPDIR="+work)
		out, _ := cmd.CombinedOutput()
		raw, err := os.ReadFile(term)
		if err != nil {
			t.Fatalf("no report: %v\n%s", err, out)
		}
		var r diskjob.Report
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		return r, string(out)
	}
	// modes downloads the disk and returns "uid:gid mode" of each special
	// file.
	modes := func(t *testing.T, r diskjob.Report) map[string]string {
		kc, err := registry.KeychainFromFile(auth)
		if err != nil {
			t.Fatal(err)
		}
		disk := filepath.Join(t.TempDir(), "disk.raw")
		if _, err := diskartifact.Download(context.Background(), registry.Client{Insecure: []string{reg.Host}}, r.Artifact, kc, disk, nil); err != nil {
			t.Fatal(err)
		}
		root := deploymentRoot(t, disk)
		got := map[string]string{}
		stat := regexp.MustCompile(`Mode:\s+0*([0-7]+)[\s\S]*User:\s+(\d+)\s+Group:\s+(\d+)`)
		for _, f := range special {
			out, err := exec.Command("debugfs", "-R", "stat "+root+strings.TrimSuffix(f.name, "/"), disk).CombinedOutput()
			m := stat.FindStringSubmatch(string(out))
			if err != nil || m == nil {
				t.Fatalf("debugfs stat %s: %v\n%s", f.name, err, out)
			}
			got[f.name] = m[2] + ":" + m[3] + " " + m[1]
		}
		return got
	}
	want := map[string]string{}
	for _, f := range special {
		want[f.name] = strings.Join([]string{itoa(f.uid) + ":" + itoa(f.gid), strings.TrimLeft(octal(f.mode), "0")}, " ")
	}

	t.Run("the pod's", func(t *testing.T) {
		r, log := withCaps(t, diskjob.Capabilities)
		if r.Artifact == "" {
			t.Fatalf("report %+v\n%s", r, log)
		}
		for name, m := range modes(t, r) {
			if m != want[name] {
				t.Errorf("%s on the disk: %s, want %s", name, m, want[name])
			}
		}
	})
	for _, drop := range []corev1.Capability{"CHOWN", "DAC_READ_SEARCH", "FSETID"} {
		t.Run("without "+string(drop), func(t *testing.T) {
			caps := slices.DeleteFunc(slices.Clone(diskjob.Capabilities), func(c corev1.Capability) bool { return c == drop })
			r, _ := withCaps(t, caps)
			if r.Artifact == "" {
				return // failed: needed
			}
			got := modes(t, r)
			for name := range want {
				if got[name] != want[name] {
					return // a wrong owner or mode: needed
				}
			}
			t.Errorf("the disk is right without %s: it is not needed", drop)
		})
	}
}

// deploymentRoot is where the image's files are on the disk: the ostree
// deployment's root ("/" when the disk has none, where the caller's
// checks then find nothing).
func deploymentRoot(t *testing.T, disk string) string {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", "ls -p /ostree/deploy/default/deploy", disk).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		// /inode/mode/uid/gid/name/size/
		if f := strings.Split(line, "/"); len(f) > 5 && strings.HasSuffix(f[5], ".0") {
			return "/ostree/deploy/default/deploy/" + f[5] + "/"
		}
	}
	return "/"
}

func itoa(i int) string    { return strconv.Itoa(i) }
func octal(m int64) string { return strconv.FormatInt(m, 8) }
