package liveapply_test

import (
	"archive/tar"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"

	"github.com/strata-dev/strata/rollout/hostfs"
	"github.com/strata-dev/strata/rollout/liveapply"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/testregistry"
)

// node is one simulated node: bootc-sim over a real ostree sysroot.
type node struct {
	sim  *bootcsim.Sim
	host *hostfs.Root
}

func newNode(t *testing.T) *node {
	t.Helper()
	root := filepath.Join(t.TempDir(), "node")
	// Registered after TempDir's own cleanup, so it runs before it:
	// ostree's deployments are immutable until chattr -i.
	t.Cleanup(func() {
		if err := bootcsim.Cleanup(root); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	s, err := bootcsim.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return &node{sim: s}
}

// openHost opens the node's root as the daemon opens the host's.
func (n *node) openHost(t *testing.T) *hostfs.Root {
	t.Helper()
	if n.host == nil {
		h, err := hostfs.Open(n.sim.Root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		n.host = h
	}
	return n.host
}

// staged is the host path of the staged deployment, computed from bootc
// status as the daemon computes it.
func (n *node) staged(t *testing.T) string {
	t.Helper()
	h, err := n.sim.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e := h.Status.Staged
	if e == nil || e.Ostree == nil {
		t.Fatal("no staged deployment")
	}
	return liveapply.DeploymentDir(e.Ostree.Stateroot, e.Ostree.Checksum, e.Ostree.DeploySerial)
}

// configDiff runs `ostree admin config-diff` on the booted deployment
// and returns its lines by host path ("M", "A" or "D").
func (n *node) configDiff(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	h, err := n.sim.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// With --os, config-diff takes the stateroot's first deployment: the
	// booted one only while nothing is staged.
	if h.Status.Staged != nil || h.Status.RollbackQueued {
		t.Fatal("config-diff needs the booted deployment first")
	}
	out, err := exec.CommandContext(ctx, "ostree", "admin", "config-diff", "--sysroot="+filepath.Join(n.sim.Root, "sysroot"), "--os=strata").CombinedOutput()
	if err != nil {
		t.Fatalf("ostree admin config-diff: %v: %s", err, out)
	}
	diff := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		// ostree prints paths relative to etc.
		diff["/etc/"+strings.TrimPrefix(f[1], "/")] = f[0]
	}
	t.Logf("config-diff:\n%s", out)
	return diff
}

// file is one tar entry of a test image layer.
type file struct {
	name     string
	mode     int64
	uid, gid int
	body     string
	link     string // a symlink's target
}

func dir(name string) file { return file{name: name + "/", mode: 0o755} }

// push pushes busybox plus one layer of files.
func push(t *testing.T, reg *testregistry.Registry, tag string, files ...file) string {
	t.Helper()
	layer := testregistry.TarLayer(t, func(tw *tar.Writer) error {
		for _, f := range files {
			h := &tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: f.mode, Uid: f.uid, Gid: f.gid,
				Size: int64(len(f.body)), ModTime: time.Unix(0, 0)}
			switch {
			case strings.HasSuffix(f.name, "/"):
				h.Typeflag, h.Size = tar.TypeDir, 0
			case f.link != "":
				h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, f.link, 0
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write([]byte(f.body)); err != nil {
				return err
			}
		}
		return nil
	})
	img, err := mutate.AppendLayers(testregistry.Busybox(t), layer)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	return reg.Push(t, tag, img)
}

const (
	unitPath = "/etc/systemd/system/strata-live.service"
	wantPath = "/etc/systemd/system/multi-user.target.wants/strata-live.service"
	unitBody = "[Unit]\nDescription=live\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
)

// images pushes A (booted first), B (chrony.conf's content changed,
// foo's mode and owner only, secret.conf's content, mode and owner, a
// unit and its enablement link added, old.conf removed) and C
// (chrony.conf changed again).
func images(t *testing.T, reg *testregistry.Registry) (a, b, c string) {
	t.Helper()
	common := []file{dir("etc/systemd"), dir("etc/systemd/system"),
		{name: "etc/keep.conf", mode: 0o644, body: "keep\n"}}
	a = push(t, reg, "strata/live:a", append(common,
		file{name: "etc/chrony.conf", mode: 0o644, body: "server a.example iburst\n"},
		file{name: "etc/foo", mode: 0o644, body: "foo\n"},
		file{name: "etc/secret.conf", mode: 0o644, body: "token=a\n"},
		file{name: "etc/old.conf", mode: 0o644, body: "old\n"})...)
	bFiles := slices.Concat(common, []file{
		{name: "etc/foo", mode: 0o600, uid: 1000, gid: 1000, body: "foo\n"},
		{name: "etc/secret.conf", mode: 0o600, uid: 1000, gid: 1000, body: "token=b\n"},
		{name: "etc/systemd/system/strata-live.service", mode: 0o644, body: unitBody},
		dir("etc/systemd/system/multi-user.target.wants"),
		{name: "etc/systemd/system/multi-user.target.wants/strata-live.service", link: unitPath}})
	b = push(t, reg, "strata/live:b", append(bFiles,
		file{name: "etc/chrony.conf", mode: 0o644, body: "server b.example iburst\n"})...)
	c = push(t, reg, "strata/live:c", append(bFiles,
		file{name: "etc/chrony.conf", mode: 0o644, body: "server c.example iburst\n"})...)
	return a, b, c
}

// changed are the /etc paths that differ between A and B.
var changed = []string{"/etc/chrony.conf", "/etc/foo", "/etc/secret.conf", unitPath, wantPath, "/etc/old.conf"}

func readLive(t *testing.T, n *node, p string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.sim.Root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// expectB asserts that the node's /etc has B's versions of the changed
// paths, each checked on its own (not through Verify).
func expectB(t *testing.T, n *node, chrony string) {
	t.Helper()
	if got := readLive(t, n, "/etc/chrony.conf"); got != chrony {
		t.Errorf("/etc/chrony.conf = %q, want %q", got, chrony)
	}
	for _, p := range []string{"/etc/foo", "/etc/secret.conf"} {
		fi, err := os.Lstat(filepath.Join(n.sim.Root, p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Mode&0o7777 != 0o600 || st.Uid != 1000 || st.Gid != 1000 {
			t.Errorf("%s: mode %04o owner %d:%d, want 0600 1000:1000", p, st.Mode&0o7777, st.Uid, st.Gid)
		}
	}
	if got := readLive(t, n, "/etc/secret.conf"); got != "token=b\n" {
		t.Errorf("/etc/secret.conf = %q", got)
	}
	if got := readLive(t, n, unitPath); got != unitBody {
		t.Errorf("%s = %q", unitPath, got)
	}
	if target, err := os.Readlink(filepath.Join(n.sim.Root, wantPath)); err != nil || target != unitPath {
		t.Errorf("%s -> %q (%v), want -> %s", wantPath, target, err, unitPath)
	}
	if _, err := os.Lstat(filepath.Join(n.sim.Root, "etc/old.conf")); !os.IsNotExist(err) {
		t.Errorf("/etc/old.conf is still there (%v)", err)
	}
}

// TestLiveApplyIsNotALocalModification is issue 21's trap, on a real
// ostree sysroot: B is staged over A and its changed /etc paths are
// applied live; after the reboot into B none of them is a local
// modification for `ostree admin config-diff`, and C, changing
// chrony.conf again, takes effect.
func TestLiveApplyIsNotALocalModification(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	a, b, c := images(t, reg)
	n := newNode(t)
	if err := n.sim.Init(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := n.sim.Switch(ctx, b, bootcsim.SwitchOptions{}); err != nil {
		t.Fatal(err)
	}
	dep := n.staged(t)
	// The staged etc's label, as ostree gives one to /etc files on an
	// SELinux host (user.* here): the live file must carry it.
	if err := unix.Setxattr(filepath.Join(n.sim.Root, dep, "etc/chrony.conf"), "user.strata.label", []byte("etc_t"), 0); err != nil {
		t.Fatal(err)
	}
	host := n.openHost(t)
	changes, err := liveapply.ApplyAndVerify(host, dep, changed)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ch := range changes {
		got[ch.Path] = ch.Action
	}
	want := map[string]string{"/etc/chrony.conf": "written", "/etc/foo": "written", "/etc/secret.conf": "written", unitPath: "written", wantPath: "linked", "/etc/old.conf": "removed"}
	if len(got) != len(want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("%s: %q, want %q", p, got[p], a)
		}
	}
	expectB(t, n, "server b.example iburst\n")
	label := make([]byte, 64)
	if k, err := unix.Getxattr(filepath.Join(n.sim.Root, "etc/chrony.conf"), "user.strata.label", label); err != nil || string(label[:k]) != "etc_t" {
		t.Errorf("live chrony.conf label %q (%v), want etc_t", label[:max(k, 0)], err)
	}
	// The new parent directory is the staged one too (0755, root).
	if fi, err := os.Stat(filepath.Join(n.sim.Root, filepath.Dir(wantPath))); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("%s: %v %v", filepath.Dir(wantPath), fi, err)
	}
	// Applying again changes nothing.
	if changes, err := liveapply.Apply(host, dep, changed); err != nil {
		t.Fatal(err)
	} else {
		for _, ch := range changes {
			if ch.Action != "unchanged" {
				t.Errorf("second apply: %s %s", ch.Path, ch.Action)
			}
		}
	}

	// The reboot into B: ostree merges the live /etc into B's.
	if err := n.sim.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	expectB(t, n, "server b.example iburst\n")
	diff := n.configDiff(t)
	for _, p := range changed {
		if s, ok := diff[p]; ok {
			t.Errorf("config-diff lists %s (%s): the live apply left a local modification", p, s)
		}
	}

	// C changes chrony.conf again and the node follows it.
	if _, err := n.sim.Switch(ctx, c, bootcsim.SwitchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.sim.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	expectB(t, n, "server c.example iburst\n")
	if s, ok := n.configDiff(t)["/etc/chrony.conf"]; ok {
		t.Errorf("config-diff lists /etc/chrony.conf (%s) after C", s)
	}
}

// TestVerifyCatchesContentOnlyWrite is the negative: a live write of the
// content alone (an editor's, or a writer that drops the metadata) keeps
// the booted file's mode, owner and xattrs. Verify names the
// differences, as pinning where ostree compares them; after the reboot
// config-diff indeed lists secret.conf, whose content and metadata both
// changed, so the metadata copy is what keeps a live apply from pinning.
// (foo, whose content did not change, is left as A has it, which is no
// local modification: B's foo arrives only at the reboot, and Verify
// says the live one is wrong until then.)
func TestVerifyCatchesContentOnlyWrite(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	a, b, _ := images(t, reg)
	n := newNode(t)
	if err := n.sim.Init(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := n.sim.Switch(ctx, b, bootcsim.SwitchOptions{}); err != nil {
		t.Fatal(err)
	}
	dep := n.staged(t)
	if err := unix.Setxattr(filepath.Join(n.sim.Root, dep, "etc/chrony.conf"), "user.strata.label", []byte("etc_t"), 0); err != nil {
		t.Fatal(err)
	}
	paths := []string{"/etc/foo", "/etc/secret.conf", "/etc/chrony.conf"}
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(n.sim.Root, dep, p))
		if err != nil {
			t.Fatal(err)
		}
		// os.WriteFile truncates the existing file: mode, owner and
		// xattrs stay the booted file's.
		if err := os.WriteFile(filepath.Join(n.sim.Root, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := liveapply.Verify(n.openHost(t), dep, paths)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]liveapply.Mismatch{}
	for _, m := range ms {
		byPath[m.Path] = m
	}
	for _, p := range []string{"/etc/foo", "/etc/secret.conf"} {
		m := byPath[p]
		if !m.Pins || !slices.Equal(m.Diffs, []string{"mode 0644, want 0600", "owner 0:0, want 1000:1000"}) {
			t.Errorf("%s mismatch %+v, want a pinning mode and owner difference", p, m)
		}
	}
	chrony := byPath["/etc/chrony.conf"]
	if chrony.Pins || !slices.Equal(chrony.Diffs, []string{`xattr user.strata.label missing, want "etc_t"`}) {
		t.Errorf("/etc/chrony.conf mismatch %+v, want only the missing label, not pinning", chrony)
	}
	if len(ms) != 3 {
		t.Errorf("mismatches %v", ms)
	}

	if err := n.sim.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	diff := n.configDiff(t)
	if diff["/etc/secret.conf"] != "M" {
		t.Errorf("config-diff: /etc/secret.conf %q, want M: the content-only write is a local modification", diff["/etc/secret.conf"])
	}
	// ostree ignores xattrs: the label alone does not pin.
	for _, p := range []string{"/etc/chrony.conf", "/etc/foo"} {
		if s, ok := diff[p]; ok {
			t.Errorf("config-diff lists %s (%s)", p, s)
		}
	}
}

// TestSecondLiveApplyBeforeReboot pins the contract for a second live
// apply before any reboot: ostree still merges from the booted A, so the
// paths to apply are those that differ between the image the live /etc
// follows (B, applied live) and the new one (D, which reverts
// chrony.conf to A's), not between A and D. Applied by diff(B, D), the
// node boots D with nothing pinned; by diff(A, D), which leaves out
// chrony.conf, B's chrony.conf stays live, and ostree pins it.
func TestSecondLiveApplyBeforeReboot(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	a, b, _ := images(t, reg)
	// D is B with A's chrony.conf.
	d := push(t, reg, "strata/live:d",
		dir("etc/systemd"), dir("etc/systemd/system"),
		file{name: "etc/keep.conf", mode: 0o644, body: "keep\n"},
		file{name: "etc/foo", mode: 0o600, uid: 1000, gid: 1000, body: "foo\n"},
		file{name: "etc/secret.conf", mode: 0o600, uid: 1000, gid: 1000, body: "token=b\n"},
		file{name: "etc/systemd/system/strata-live.service", mode: 0o644, body: unitBody},
		dir("etc/systemd/system/multi-user.target.wants"),
		file{name: "etc/systemd/system/multi-user.target.wants/strata-live.service", link: unitPath},
		file{name: "etc/chrony.conf", mode: 0o644, body: "server a.example iburst\n"})
	for _, tc := range []struct {
		name   string
		paths  []string
		pinned bool
	}{
		{name: "diff from the live image", paths: []string{"/etc/chrony.conf"}},
		{name: "diff from the booted image", paths: nil, pinned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			if err := n.sim.Init(ctx, a); err != nil {
				t.Fatal(err)
			}
			if _, err := n.sim.Switch(ctx, b, bootcsim.SwitchOptions{}); err != nil {
				t.Fatal(err)
			}
			host := n.openHost(t)
			if _, err := liveapply.ApplyAndVerify(host, n.staged(t), changed); err != nil {
				t.Fatal(err)
			}
			if _, err := n.sim.Switch(ctx, d, bootcsim.SwitchOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := liveapply.ApplyAndVerify(host, n.staged(t), tc.paths); err != nil {
				t.Fatal(err)
			}
			if err := n.sim.Reboot(ctx); err != nil {
				t.Fatal(err)
			}
			s, listed := n.configDiff(t)["/etc/chrony.conf"]
			if listed != tc.pinned {
				t.Errorf("config-diff lists /etc/chrony.conf: %v (%s), want %v", listed, s, tc.pinned)
			}
			want := "server a.example iburst\n"
			if tc.pinned {
				want = "server b.example iburst\n"
			}
			if got := readLive(t, n, "/etc/chrony.conf"); got != want {
				t.Errorf("/etc/chrony.conf = %q, want %q", got, want)
			}
		})
	}
}
