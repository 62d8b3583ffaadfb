package liveapply_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/strata-dev/strata/rollout/hostfs"
	"github.com/strata-dev/strata/rollout/liveapply"
)

// fakeDep is the host path of the deployment that fakeHost makes.
var fakeDep = liveapply.DeploymentDir("os", "abc", 0)

// fakeHost makes a host root with a live /etc and a deployment whose
// etc and usr/etc are plain directories: enough for what does not need
// ostree's merge. Files are written to the live etc, the staged etc and
// the image's usr/etc with put.
func fakeHost(t *testing.T) (*hostfs.Root, string) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"etc", fakeDep + "/etc", fakeDep + "/usr/etc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

func put(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// image puts a file (0644, root) into both the staged etc and usr/etc, as a staged
// deployment without local modifications has it.
func image(t *testing.T, dir, rel, content string) {
	t.Helper()
	put(t, filepath.Join(dir, fakeDep, "etc", rel), content, 0o644)
	put(t, filepath.Join(dir, fakeDep, "usr/etc", rel), content, 0o644)
}

func refusedPath(t *testing.T, err error) *liveapply.RefusedError {
	t.Helper()
	var re *liveapply.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a *RefusedError", err)
	}
	return re
}

func TestRefusesPathsOutsideEtc(t *testing.T) {
	host, dir := fakeHost(t)
	image(t, dir, "ok.conf", "ok\n")
	for _, p := range []string{
		"/usr/lib/systemd/system/x.service", "/usr", "/usr/etc/ok.conf",
		"/var/lib/x", "/etc", "/etc/../usr/x", "etc/ok.conf", "/etc/ok.conf/", "/etcx/y", "/run/x",
	} {
		// A path that would apply is in the same call: nothing is
		// written when one is refused.
		_, err := liveapply.Apply(host, fakeDep, []string{"/etc/ok.conf", p})
		re := refusedPath(t, err)
		if re.Path != p {
			t.Errorf("%s: refused %s", p, re.Path)
		}
		if strings.HasPrefix(p, "/usr") && !strings.Contains(err.Error(), "/usr is read-only") {
			t.Errorf("%s: %v, want the /usr reason", p, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "etc/ok.conf")); !os.IsNotExist(err) {
			t.Fatalf("%s: /etc/ok.conf was written though the call was refused", p)
		}
		if _, err := liveapply.Verify(host, fakeDep, []string{p}); refusedPath(t, err) == nil {
			t.Fatal("unreachable")
		}
	}
	if _, err := liveapply.Apply(host, fakeDep, []string{"/etc/ok.conf"}); err != nil {
		t.Fatal(err)
	}
}

// TestRefusesPlantedLinks: whoever owns a directory in /etc can plant
// links in it; none of them is followed.
func TestRefusesPlantedLinks(t *testing.T) {
	host, dir := fakeHost(t)
	const user = 1000
	// /etc/app is the user's, in the live /etc as in the image.
	for _, d := range []string{"etc/app", fakeDep + "/etc/app", fakeDep + "/usr/etc/app"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(dir, d), user, user); err != nil {
			t.Fatal(err)
		}
	}
	image(t, dir, "app/conf.d/x.conf", "x\n")
	image(t, dir, "app/y.conf", "y\n")
	put(t, filepath.Join(dir, "etc/shadow"), "root:secret\n", 0o600)
	if err := os.MkdirAll(filepath.Join(dir, "etc/secret"), 0o700); err != nil {
		t.Fatal(err)
	}
	plant := func(target, at string) {
		t.Helper()
		p := filepath.Join(dir, at)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, user, user); err != nil {
			t.Fatal(err)
		}
	}
	// A link in place of a parent directory: refused, nothing written
	// where it points.
	plant("../secret", "etc/app/conf.d")
	_, err := liveapply.Apply(host, fakeDep, []string{"/etc/app/conf.d/x.conf"})
	if re := refusedPath(t, err); !strings.Contains(re.Reason, "link in place of one of its parent directories") {
		t.Errorf("reason %q", re.Reason)
	}
	if _, err := os.Lstat(filepath.Join(dir, "etc/secret/x.conf")); !os.IsNotExist(err) {
		t.Error("written through the planted parent link")
	}
	ms, err := liveapply.Verify(host, fakeDep, []string{"/etc/app/conf.d/x.conf"})
	if err != nil || len(ms) != 1 || !ms[0].Pins {
		t.Errorf("verify through the planted link: %v %v", ms, err)
	}

	// A link at the path itself: replaced by the file, its target left
	// alone.
	plant("/etc/shadow", "etc/app/y.conf")
	if _, err := liveapply.ApplyAndVerify(host, fakeDep, []string{"/etc/app/y.conf"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "etc/app/y.conf")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("/etc/app/y.conf: %v %v, want a regular file", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "etc/shadow")); string(b) != "root:secret\n" {
		t.Errorf("/etc/shadow = %q: written through the planted link", b)
	}
	// The host's /etc itself, seen through a user's link: hostfs's rule.
	if err := os.Rename(filepath.Join(dir, "etc"), filepath.Join(dir, "realetc")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "home/user"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(dir, "home/user"), user, user); err != nil {
		t.Fatal(err)
	}
	plant("/realetc", "home/user/etc")
	plant("home/user/etc", "etc")
	_, err = liveapply.Apply(host, fakeDep, []string{"/etc/app/y.conf"})
	var ue *hostfs.UnsafeTransitionError
	if !errors.As(err, &ue) {
		t.Errorf("/etc through a user's link: %v, want an unsafe transition", err)
	}
}

// TestImageWinsOverStagedEtc: a deployment merged at deploy time
// carries the live /etc's differences from the booted image in its etc;
// Apply writes the image's version (usr/etc) all the same, with the
// staged etc's xattrs where the type agrees.
func TestImageWinsOverStagedEtc(t *testing.T) {
	host, dir := fakeHost(t)
	staged := func(rel string) string { return filepath.Join(dir, fakeDep, "etc", rel) }
	pristine := func(rel string) string { return filepath.Join(dir, fakeDep, "usr/etc", rel) }
	put(t, pristine("mod.conf"), "image\n", 0o644)
	put(t, staged("mod.conf"), "local\n", 0o600)
	if err := unix.Setxattr(staged("mod.conf"), "user.label", []byte("etc_t"), 0); err != nil {
		t.Fatal(err)
	}
	put(t, staged("added.conf"), "local\n", 0o644)
	put(t, filepath.Join(dir, "etc/added.conf"), "local\n", 0o644)
	put(t, pristine("gone.conf"), "image\n", 0o644)
	if _, err := liveapply.ApplyAndVerify(host, fakeDep, []string{"/etc/mod.conf", "/etc/added.conf", "/etc/gone.conf"}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "etc/mod.conf"))
	if b, _ := os.ReadFile(filepath.Join(dir, "etc/mod.conf")); err != nil || string(b) != "image\n" || fi.Mode().Perm() != 0o644 {
		t.Errorf("/etc/mod.conf = %q %v (%v), want the image's", b, fi.Mode(), err)
	}
	label := make([]byte, 16)
	if n, err := unix.Getxattr(filepath.Join(dir, "etc/mod.conf"), "user.label", label); err != nil || string(label[:n]) != "etc_t" {
		t.Errorf("/etc/mod.conf label: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "etc/added.conf")); !os.IsNotExist(err) {
		t.Error("/etc/added.conf, which the image does not have, is still there")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "etc/gone.conf")); err != nil || string(b) != "image\n" {
		t.Errorf("/etc/gone.conf = %q (%v), want the image's", b, err)
	}
}

// TestDirectoriesAndRemovals: a new directory is made as staged, a
// directory in the way of a file is refused, a removed directory goes
// after its content.
func TestDirectoriesAndRemovals(t *testing.T) {
	host, dir := fakeHost(t)
	for _, d := range []string{fakeDep + "/etc/new.d", fakeDep + "/usr/etc/new.d"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(dir, d), 0, 4); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	image(t, dir, "new.d/a.conf", "a\n")
	put(t, filepath.Join(dir, "etc/old.d/x.conf"), "x\n", 0o644)
	changes, err := liveapply.ApplyAndVerify(host, fakeDep, []string{"/etc/old.d", "/etc/new.d/a.conf", "/etc/old.d/x.conf", "/etc/new.d"})
	if err != nil {
		t.Fatal(err)
	}
	want := []liveapply.Change{{Path: "/etc/new.d", Action: "directory"}, {Path: "/etc/new.d/a.conf", Action: "written"},
		{Path: "/etc/old.d/x.conf", Action: "removed"}, {Path: "/etc/old.d", Action: "removed"}}
	if len(changes) != len(want) {
		t.Fatalf("changes %v, want %v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Errorf("change %d: %v, want %v", i, changes[i], want[i])
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "etc/old.d")); !os.IsNotExist(err) {
		t.Error("/etc/old.d is still there")
	}

	// A directory where the image has a file.
	image(t, dir, "conf", "c\n")
	if err := os.MkdirAll(filepath.Join(dir, "etc/conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = liveapply.Apply(host, fakeDep, []string{"/etc/conf"})
	if re := refusedPath(t, err); !strings.Contains(re.Reason, "a directory is in its place") {
		t.Errorf("reason %q", re.Reason)
	}
}

// TestVerifyNamesXattrs: xattrs the staged file has and the live one
// lacks, or the reverse, are mismatches that do not pin.
func TestVerifyNamesXattrs(t *testing.T) {
	host, dir := fakeHost(t)
	image(t, dir, "a.conf", "a\n")
	put(t, filepath.Join(dir, "etc/a.conf"), "a\n", 0o644)
	if err := unix.Setxattr(filepath.Join(dir, fakeDep, "etc/a.conf"), "user.want", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(dir, "etc/a.conf"), "user.extra", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	ms, err := liveapply.Verify(host, fakeDep, []string{"/etc/a.conf"})
	if err != nil {
		t.Fatal(err)
	}
	want := `/etc/a.conf: xattr user.want missing, want "1", xattr user.extra = "2", want none`
	if len(ms) != 1 || ms[0].String() != want || ms[0].Pins {
		t.Fatalf("mismatches %v, want %s, not pinning", ms, want)
	}
	// Apply fixes both: the extra one is removed.
	if _, err := liveapply.ApplyAndVerify(host, fakeDep, []string{"/etc/a.conf"}); err != nil {
		t.Fatal(err)
	}
}

// TestRemovesStaleTemps: a writer killed between its temporary file and
// the rename leaves the temporary in /etc, a file no image has that
// ostree's merge would keep; the next Apply of the path removes it.
func TestRemovesStaleTemps(t *testing.T) {
	host, dir := fakeHost(t)
	image(t, dir, "a.conf", "a\n")
	stale := filepath.Join(dir, "etc/.a.conf.strata-live-0123456789ab")
	put(t, stale, "half\n", 0o600)
	other := filepath.Join(dir, "etc/.b.conf.strata-live-0123456789ab")
	put(t, other, "not a.conf's\n", 0o600)
	if _, err := liveapply.ApplyAndVerify(host, fakeDep, []string{"/etc/a.conf"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file left (%v)", err)
	}
	if _, err := os.Lstat(other); err != nil {
		t.Errorf("another path's temporary file removed: %v", err)
	}
}

// TestLocalModifications lists what the live /etc has otherwise than an
// image in ostree's sense: xattrs alone are no local modification.
func TestLocalModifications(t *testing.T) {
	host, dir := fakeHost(t)
	image(t, dir, "same.conf", "same\n")
	image(t, dir, "edited.conf", "image\n")
	image(t, dir, "chmod.conf", "x\n")
	image(t, dir, "deleted.conf", "x\n")
	image(t, dir, "label.conf", "x\n")
	put(t, filepath.Join(dir, "etc/same.conf"), "same\n", 0o644)
	put(t, filepath.Join(dir, "etc/edited.conf"), "admin\n", 0o644)
	put(t, filepath.Join(dir, "etc/chmod.conf"), "x\n", 0o600)
	put(t, filepath.Join(dir, "etc/added.conf"), "x\n", 0o644)
	put(t, filepath.Join(dir, "etc/label.conf"), "x\n", 0o644)
	if err := unix.Setxattr(filepath.Join(dir, "etc/label.conf"), "user.label", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	ms, err := liveapply.LocalModifications(host, fakeDep, []string{
		"/etc/same.conf", "/etc/edited.conf", "/etc/chmod.conf", "/etc/added.conf", "/etc/deleted.conf", "/etc/label.conf", "/etc/none.conf"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.String())
	}
	want := []string{
		"/etc/edited.conf: content differs (6 bytes, want 6)",
		"/etc/chmod.conf: mode 0600, want 0644",
		"/etc/added.conf: is a file, want absent",
		"/etc/deleted.conf: is absent, want a file",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("local modifications:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
