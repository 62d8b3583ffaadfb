package hostfs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-dev/strata/nodeconfig"
)

const (
	coreUID = 1000
	coreGID = 1001
	wheel   = 10
)

// newRoot makes a host root shaped like an image-mode host: /home is a
// link into /var, users and groups in /etc.
func newRoot(t *testing.T) (*Root, string) {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\ncore:x:1000:1001:Core:/home/core:/bin/bash\nnohome:x:1002:1002::/var/home/nohome:/bin/sh\n", 0o644)
	write(t, filepath.Join(dir, "etc/group"), "root:x:0:\nwheel:x:10:core\ncore:x:1001:\n", 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "var/home/core"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(dir, "var/home/core"), coreUID, coreGID); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("var/home", filepath.Join(dir, "home")); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func id(n int) *nodeconfig.Owner      { return &nodeconfig.Owner{ID: &n} }
func name(s string) *nodeconfig.Owner { return &nodeconfig.Owner{Name: s} }

func file(p, content string, mode int) nodeconfig.NodeItem {
	return nodeconfig.NodeItem{Kind: nodeconfig.NodeFile, Path: p, Mode: ptr(mode), Replace: true, Contents: []byte(content), Overwrite: true}
}

// check asserts a host path's type, mode and owner.
func check(t *testing.T, p string, typ os.FileMode, mode os.FileMode, uid, gid int) os.FileInfo {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Type() != typ {
		t.Errorf("%s: type %v, want %v", p, fi.Mode().Type(), typ)
	}
	if typ != os.ModeSymlink && st.Mode&0o7777 != uint32(mode) {
		t.Errorf("%s: mode %o, want %o", p, st.Mode&0o7777, mode)
	}
	if int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("%s: owner %d:%d, want %d:%d", p, st.Uid, st.Gid, uid, gid)
	}
	return fi
}

func content(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func apply(t *testing.T, r *Root, items ...nodeconfig.NodeItem) []string {
	t.Helper()
	skipped, err := r.Apply(items)
	if err != nil {
		t.Fatal(err)
	}
	return skipped
}

// noTemps asserts that no temporary file is left in dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".strata-") {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

func TestModesAndOwners(t *testing.T) {
	r, dir := newRoot(t)
	conf := file("/var/lib/app/conf", "a=1\n", 0o640)
	conf.User, conf.Group = name("core"), name("wheel")
	suid := file("/var/lib/app/bin/tool", "#!/bin/sh\n", 0o4755)
	suid.User, suid.Group = id(1234), id(5678)
	data := nodeconfig.NodeItem{Kind: nodeconfig.NodeDirectory, Path: "/var/lib/app/data", Mode: ptr(0o750), User: name("core")}
	sticky := nodeconfig.NodeItem{Kind: nodeconfig.NodeDirectory, Path: "/srv/shared", Mode: ptr(0o1777)}
	if s := apply(t, r, conf, suid, data, sticky); len(s) != 0 {
		t.Fatalf("skipped %q", s)
	}
	check(t, filepath.Join(dir, "var/lib/app/conf"), 0, 0o640, coreUID, wheel)
	check(t, filepath.Join(dir, "var/lib/app/bin/tool"), 0, 0o4755, 1234, 5678)
	check(t, filepath.Join(dir, "var/lib/app/data"), os.ModeDir, 0o750, coreUID, 0)
	check(t, filepath.Join(dir, "srv/shared"), os.ModeDir, 0o1777, 0, 0)
	// Missing parents are created 0755 and owned by root, whatever the
	// umask.
	for _, p := range []string{"var/lib", "var/lib/app", "var/lib/app/bin", "srv"} {
		check(t, filepath.Join(dir, p), os.ModeDir, 0o755, 0, 0)
	}
	if got := content(t, filepath.Join(dir, "var/lib/app/conf")); got != "a=1\n" {
		t.Errorf("content %q", got)
	}
	// A second run changes a mode and an owner in place.
	conf.Mode, conf.User = ptr(0o600), nil
	data.Mode = ptr(0o700)
	if s := apply(t, r, conf, data); len(s) != 0 {
		t.Fatalf("skipped %q", s)
	}
	check(t, filepath.Join(dir, "var/lib/app/conf"), 0, 0o600, 0, wheel)
	check(t, filepath.Join(dir, "var/lib/app/data"), os.ModeDir, 0o700, coreUID, 0)
	noTemps(t, filepath.Join(dir, "var/lib/app"))
}

func TestAtomicReplaceAndOverwrite(t *testing.T) {
	r, dir := newRoot(t)
	p := filepath.Join(dir, "var/lib/app/conf")
	write(t, p, "old\n", 0o644)
	before, _ := os.Lstat(p)

	// Overwrite false leaves a different file alone and says so.
	keep := file("/var/lib/app/conf", "new\n", 0o600)
	keep.Overwrite = false
	s := apply(t, r, keep)
	if len(s) != 1 || !strings.Contains(s[0], "/var/lib/app/conf") || !strings.Contains(s[0], "overwrite is false") {
		t.Errorf("skipped %q, want the file named with overwrite is false", s)
	}
	if got := content(t, p); got != "old\n" {
		t.Errorf("overwrite=false changed the file to %q", got)
	}
	check(t, p, 0, 0o644, 0, 0)

	// Overwrite true replaces it with a new inode: a reader sees the old
	// file or the new one, never a half-written one.
	s = apply(t, r, file("/var/lib/app/conf", "new\n", 0o600))
	if len(s) != 0 {
		t.Errorf("skipped %q", s)
	}
	after := check(t, p, 0, 0o600, 0, 0)
	if os.SameFile(before, after) {
		t.Error("the file was rewritten in place, not replaced")
	}
	if got := content(t, p); got != "new\n" {
		t.Errorf("content %q", got)
	}
	noTemps(t, filepath.Dir(p))

	// The same content with overwrite false is no conflict; its mode is
	// fixed in place.
	keep.Mode = ptr(0o640)
	if s := apply(t, r, keep); len(s) != 0 {
		t.Errorf("skipped %q", s)
	}
	same := check(t, p, 0, 0o640, 0, 0)
	if !os.SameFile(after, same) {
		t.Error("an unchanged file was replaced")
	}

	// A directory in a file's place is never removed.
	if err := os.MkdirAll(filepath.Join(dir, "var/lib/app/dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if s := apply(t, r, file("/var/lib/app/dir", "x", 0o644)); len(s) != 1 || !strings.Contains(s[0], "directory") {
		t.Errorf("skipped %q, want the directory in the way", s)
	}
	// A link at the file's path is replaced by the file, not followed.
	write(t, filepath.Join(dir, "var/lib/app/target"), "target\n", 0o644)
	if err := os.Symlink("target", filepath.Join(dir, "var/lib/app/viaLink")); err != nil {
		t.Fatal(err)
	}
	apply(t, r, file("/var/lib/app/viaLink", "file\n", 0o644))
	check(t, filepath.Join(dir, "var/lib/app/viaLink"), 0, 0o644, 0, 0)
	if got := content(t, filepath.Join(dir, "var/lib/app/target")); got != "target\n" {
		t.Errorf("the link's target was written: %q", got)
	}
}

func TestAppend(t *testing.T) {
	r, dir := newRoot(t)
	appendOnly := nodeconfig.NodeItem{Kind: nodeconfig.NodeFile, Path: "/var/lib/app/list", Mode: ptr(0o644), Append: [][]byte{[]byte("b\n"), []byte("c\n")}}
	apply(t, r, appendOnly)
	p := filepath.Join(dir, "var/lib/app/list")
	if got := content(t, p); got != "b\nc\n" {
		t.Errorf("append to a missing file: %q", got)
	}
	// Applying again does not append again.
	apply(t, r, appendOnly)
	if got := content(t, p); got != "b\nc\n" {
		t.Errorf("second apply: %q", got)
	}
	// Existing content is kept, whatever overwrite says.
	write(t, p, "a\n", 0o644)
	apply(t, r, appendOnly)
	if got := content(t, p); got != "a\nb\nc\n" {
		t.Errorf("append to an existing file: %q", got)
	}
	// Replace: contents then appends.
	both := file("/var/lib/app/both", "head\n", 0o644)
	both.Append = [][]byte{[]byte("tail\n")}
	apply(t, r, both)
	apply(t, r, both)
	if got := content(t, filepath.Join(dir, "var/lib/app/both")); got != "head\ntail\n" {
		t.Errorf("contents and append: %q", got)
	}
}

func TestLinks(t *testing.T) {
	r, dir := newRoot(t)
	sym := nodeconfig.NodeItem{Kind: nodeconfig.NodeLink, Path: "/var/lib/app/current", Target: "releases/1", User: name("core")}
	// The hard link sorts before its target and is still made after it.
	hard := nodeconfig.NodeItem{Kind: nodeconfig.NodeLink, Path: "/var/lib/app/a-hard", Target: "/var/lib/app/z-file", Hard: true}
	if s := apply(t, r, hard, sym, file("/var/lib/app/z-file", "z\n", 0o644)); len(s) != 0 {
		t.Fatalf("skipped %q", s)
	}
	check(t, filepath.Join(dir, "var/lib/app/current"), os.ModeSymlink, 0, coreUID, 0)
	if got, _ := os.Readlink(filepath.Join(dir, "var/lib/app/current")); got != "releases/1" {
		t.Errorf("link target %q", got)
	}
	a, _ := os.Lstat(filepath.Join(dir, "var/lib/app/a-hard"))
	z, _ := os.Lstat(filepath.Join(dir, "var/lib/app/z-file"))
	if a == nil || !os.SameFile(a, z) {
		t.Error("the hard link does not share its target's inode")
	}
	// Again: nothing to do.
	if s := apply(t, r, hard, sym, file("/var/lib/app/z-file", "z\n", 0o644)); len(s) != 0 {
		t.Fatalf("skipped %q", s)
	}
	// A different link with overwrite false stays; with overwrite it is
	// replaced.
	other := sym
	other.Target = "releases/2"
	if s := apply(t, r, other); len(s) != 1 || !strings.Contains(s[0], "overwrite is false") {
		t.Errorf("skipped %q", s)
	}
	other.Overwrite = true
	apply(t, r, other)
	if got, _ := os.Readlink(filepath.Join(dir, "var/lib/app/current")); got != "releases/2" {
		t.Errorf("link target %q after overwrite", got)
	}
	// A hard link to a missing file is reported.
	missing := nodeconfig.NodeItem{Kind: nodeconfig.NodeLink, Path: "/var/lib/app/h2", Target: "/var/lib/app/none", Hard: true}
	if s := apply(t, r, missing); len(s) != 1 || !strings.Contains(s[0], "does not exist") {
		t.Errorf("skipped %q", s)
	}
	noTemps(t, filepath.Join(dir, "var/lib/app"))
}

func TestSSHKeys(t *testing.T) {
	r, dir := newRoot(t)
	keys := nodeconfig.NodeItem{Kind: nodeconfig.NodeSSHAuthorizedKeys, UserName: "core", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAA one", "ssh-ed25519 BBBB two"}}
	if s := apply(t, r, keys); len(s) != 0 {
		t.Fatalf("skipped %q", s)
	}
	// /home/core is reached through the home -> var/home link.
	p := filepath.Join(dir, "var/home/core/.ssh/authorized_keys.d", SSHKeysFile)
	check(t, p, 0, 0o600, coreUID, coreGID)
	check(t, filepath.Join(dir, "var/home/core/.ssh"), os.ModeDir, 0o700, coreUID, coreGID)
	check(t, filepath.Join(dir, "var/home/core/.ssh/authorized_keys.d"), os.ModeDir, 0o700, coreUID, coreGID)
	if got := content(t, p); got != "ssh-ed25519 AAAA one\nssh-ed25519 BBBB two\n" {
		t.Errorf("keys %q", got)
	}
	keys.SSHAuthorizedKeys = []string{"ssh-ed25519 CCCC three"}
	apply(t, r, keys)
	if got := content(t, p); got != "ssh-ed25519 CCCC three\n" {
		t.Errorf("replaced keys %q", got)
	}
	s := apply(t, r,
		nodeconfig.NodeItem{Kind: nodeconfig.NodeSSHAuthorizedKeys, UserName: "ghost", SSHAuthorizedKeys: []string{"k"}},
		nodeconfig.NodeItem{Kind: nodeconfig.NodeSSHAuthorizedKeys, UserName: "nohome", SSHAuthorizedKeys: []string{"k"}})
	if len(s) != 2 || !strings.Contains(s[0], "ghost") || !strings.Contains(s[1], "does not exist") {
		t.Errorf("skipped %q, want the unknown user and the missing home", s)
	}
}

func TestUnknownOwnerSkipsOnlyThatItem(t *testing.T) {
	r, dir := newRoot(t)
	bad := file("/var/lib/app/bad", "x", 0o644)
	bad.User = name("ghost")
	badGroup := file("/var/lib/app/badgroup", "x", 0o644)
	badGroup.Group = name("ghosts")
	s := apply(t, r, bad, badGroup, file("/var/lib/app/good", "y", 0o644))
	if len(s) != 2 || !strings.Contains(s[0], `user "ghost"`) || !strings.Contains(s[1], `group "ghosts"`) {
		t.Errorf("skipped %q", s)
	}
	if _, err := os.Lstat(filepath.Join(dir, "var/lib/app/bad")); !os.IsNotExist(err) {
		t.Errorf("the item with an unknown user was written: %v", err)
	}
	check(t, filepath.Join(dir, "var/lib/app/good"), 0, 0o644, 0, 0)
}

// TestLinksNeverLeadOutOfTheRoot plants links inside the host root that
// point outside it, absolutely and with "..", and checks that every
// write resolves them inside the root and the outside stays untouched.
func TestLinksNeverLeadOutOfTheRoot(t *testing.T) {
	r, dir := newRoot(t)
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret"), "do not touch\n", 0o600)
	snapshot := listTree(t, outside)

	// var/lib/x -> /<outside> (absolute), var/lib/y -> ../../../../..<outside>,
	// and /run -> <outside> itself.
	if err := os.MkdirAll(filepath.Join(dir, "var/lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "var/lib/x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../../.."+outside, filepath.Join(dir, "var/lib/y")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "run")); err != nil {
		t.Fatal(err)
	}
	items := []nodeconfig.NodeItem{
		file("/var/lib/x/f", "inside\n", 0o644),
		file("/var/lib/x/secret", "overwritten\n", 0o644),
		{Kind: nodeconfig.NodeDirectory, Path: "/var/lib/x/d", Mode: ptr(0o755)},
		{Kind: nodeconfig.NodeLink, Path: "/var/lib/x/l", Target: "/etc/shadow"},
		{Kind: nodeconfig.NodeLink, Path: "/var/lib/h", Target: "/var/lib/x/secret", Hard: true},
		file("/var/lib/y/g", "inside\n", 0o644),
	}
	// The links point at a directory missing inside the root: nothing is
	// written through them.
	skipped := apply(t, r, items...)
	if len(skipped) == 0 {
		t.Error("writes through a dangling link were not reported")
	}
	if err := r.WriteFile("/run/ostree/auth.json", []byte("{}"), 0o600, 0, 0); err == nil {
		t.Error("a write through a dangling /run link succeeded")
	}
	assertTree(t, outside, snapshot)

	// With the directory present inside the root, the writes land there.
	inside := filepath.Join(dir, outside)
	if err := os.MkdirAll(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	skipped = apply(t, r, items...)
	for _, s := range skipped {
		if !strings.Contains(s, "/var/lib/h") {
			t.Errorf("skipped %q", s)
		}
	}
	if err := r.WriteFile("/run/ostree/auth.json", []byte("{}"), 0o600, 0, 0); err != nil {
		t.Fatal(err)
	}
	assertTree(t, outside, snapshot)
	for p, want := range map[string]string{"f": "inside\n", "secret": "overwritten\n", "g": "inside\n", "ostree/auth.json": "{}"} {
		if got := content(t, filepath.Join(inside, p)); got != want {
			t.Errorf("%s inside the root: %q, want %q", p, got, want)
		}
	}
	check(t, filepath.Join(inside, "ostree/auth.json"), 0, 0o600, 0, 0)
	if got, _ := os.Readlink(filepath.Join(inside, "l")); got != "/etc/shadow" {
		t.Errorf("link target %q", got)
	}
	// The hard link joined the file inside the root, not the outside one.
	h, _ := os.Lstat(filepath.Join(dir, "var/lib/h"))
	in, _ := os.Lstat(filepath.Join(inside, "secret"))
	if h == nil || !os.SameFile(h, in) {
		t.Error("the hard link is not to the file inside the root")
	}
	// SSH keys of a user whose home is a link out of the root.
	if err := os.Symlink(outside, filepath.Join(dir, "var/home/nohome")); err != nil {
		t.Fatal(err)
	}
	apply(t, r, nodeconfig.NodeItem{Kind: nodeconfig.NodeSSHAuthorizedKeys, UserName: "nohome", SSHAuthorizedKeys: []string{"k"}})
	assertTree(t, outside, snapshot)
	if got := content(t, filepath.Join(inside, ".ssh/authorized_keys.d", SSHKeysFile)); got != "k\n" {
		t.Errorf("keys inside the root: %q", got)
	}
}

// listTree records every path under dir with its size and mode.
func listTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		out[p] = fi.Mode().String() + " " + fi.ModTime().String() + " links " + strconv.FormatUint(st.Nlink, 10)
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] += " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertTree(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := listTree(t, dir)
	for p, v := range got {
		if want[p] != v {
			t.Errorf("%s changed: %q, was %q", p, v, want[p])
		}
	}
	for p := range want {
		if _, ok := got[p]; !ok {
			t.Errorf("%s was removed", p)
		}
	}
}

func TestWriteReadRemove(t *testing.T) {
	r, dir := newRoot(t)
	if err := r.WriteFile("/run/ostree/auth.json", []byte(`{"auths":{}}`), 0o600, 0, 0); err != nil {
		t.Fatal(err)
	}
	check(t, filepath.Join(dir, "run/ostree/auth.json"), 0, 0o600, 0, 0)
	check(t, filepath.Join(dir, "run/ostree"), os.ModeDir, 0o755, 0, 0)
	b, err := r.ReadFile("/run/ostree/auth.json")
	if err != nil || string(b) != `{"auths":{}}` {
		t.Errorf("read %q, %v", b, err)
	}
	if err := r.Remove("/run/ostree/auth.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "run/ostree/auth.json")); !os.IsNotExist(err) {
		t.Errorf("not removed: %v", err)
	}
	if err := r.Remove("/run/ostree/auth.json"); err != nil {
		t.Errorf("removing a missing file: %v", err)
	}
	if err := r.Remove("/no/such/dir/file"); err != nil {
		t.Errorf("removing under a missing directory: %v", err)
	}
	u, ok, err := r.LookupUser("core")
	if err != nil || !ok || u.UID != coreUID || u.GID != coreGID || u.Home != "/home/core" {
		t.Errorf("LookupUser(core) = %+v, %v, %v", u, ok, err)
	}
}

// TestPlantedLinkIsAnUnsafeTransition is issue 20's attack: uid 1000 owns
// /var/lib/app and plants data -> /etc there. Items under
// /var/lib/app/data owned by uid 1000 must not follow that link into the
// host's /etc: the daemon would hand /etc/systemd to the user. As
// systemd-tmpfiles does, a link owned by someone other than root may not
// lead from what that user owns to what they do not own.
func TestPlantedLinkIsAnUnsafeTransition(t *testing.T) {
	r, dir := newRoot(t)
	app := filepath.Join(dir, "var/lib/app")
	if err := os.MkdirAll(filepath.Join(dir, "etc/systemd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(app, coreUID, coreGID); err != nil {
		t.Fatal(err)
	}
	// An absolute link and a relative one, both made by the user.
	for name, target := range map[string]string{"data": "/etc", "rel": "../../../etc"} {
		if err := os.Symlink(target, filepath.Join(app, name)); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(filepath.Join(app, name), coreUID, coreGID); err != nil {
			t.Fatal(err)
		}
	}
	etc := listTree(t, filepath.Join(dir, "etc"))
	var items []nodeconfig.NodeItem
	for _, via := range []string{"data", "rel"} {
		d := nodeconfig.NodeItem{Kind: nodeconfig.NodeDirectory, Path: "/var/lib/app/" + via + "/systemd", Mode: ptr(0o700), User: id(coreUID)}
		f := file("/var/lib/app/"+via+"/systemd/x", "x\n", 0o644)
		f.User = id(coreUID)
		l := nodeconfig.NodeItem{Kind: nodeconfig.NodeLink, Path: "/var/lib/app/" + via + "/systemd/l", Target: "/tmp/x", User: id(coreUID)}
		items = append(items, d, f, l)
	}
	skipped := apply(t, r, items...)
	assertTree(t, filepath.Join(dir, "etc"), etc)
	check(t, filepath.Join(dir, "etc/systemd"), os.ModeDir, 0o755, 0, 0)
	if len(skipped) != len(items) {
		t.Fatalf("skipped %q, want all %d items refused", skipped, len(items))
	}
	for _, s := range skipped {
		if !strings.Contains(s, "unsafe path transition") {
			t.Errorf("skipped %q, want an unsafe path transition", s)
		}
	}

	// The same user's link within what the user owns is followed, and a
	// link root made is followed anywhere inside the root.
	if err := os.Mkdir(filepath.Join(app, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(app, "real"), coreUID, coreGID); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(app, "mine")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(app, "mine"), coreUID, coreGID); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/var/lib/app/real", filepath.Join(dir, "var/lib/byroot")); err != nil {
		t.Fatal(err)
	}
	mine := file("/var/lib/app/mine/a", "a\n", 0o600)
	mine.User = id(coreUID)
	if s := apply(t, r, mine, file("/var/lib/byroot/b", "b\n", 0o644)); len(s) != 0 {
		t.Fatalf("skipped %q", s)
	}
	check(t, filepath.Join(app, "real/a"), 0, 0o600, coreUID, 0)
	check(t, filepath.Join(app, "real/b"), 0, 0o644, 0, 0)
}

// TestExistingParentsKeepTheirOwner: only the directories Apply creates
// get an owner and mode from it (root, 0755); an existing parent keeps
// its own, whoever owns the item under it.
func TestExistingParentsKeepTheirOwner(t *testing.T) {
	r, dir := newRoot(t)
	parent := filepath.Join(dir, "var/lib/shared")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(parent, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	f := file("/var/lib/shared/new/conf", "x\n", 0o600)
	f.User, f.Group = id(coreUID), id(coreGID)
	if s := apply(t, r, f); len(s) != 0 {
		t.Fatalf("skipped %q", s)
	}
	check(t, parent, os.ModeDir, 0o700, 4321, 4321)
	check(t, filepath.Join(parent, "new"), os.ModeDir, 0o755, 0, 0)
	check(t, filepath.Join(parent, "new/conf"), 0, 0o600, coreUID, coreGID)
}

// TestRefusedPaths: whatever plan reaches it, Apply does not write under
// /run, /var/run (a link to /run) or the daemon's own /var/lib/strata.
func TestRefusedPaths(t *testing.T) {
	r, dir := newRoot(t)
	var items []nodeconfig.NodeItem
	for _, p := range []string{"/var/run/x", "/var/run", "/var/lib/strata/state.json", "/var/lib/strata", "/run/x"} {
		items = append(items, file(p, "x", 0o644))
	}
	items = append(items, nodeconfig.NodeItem{Kind: nodeconfig.NodeLink, Path: "/var/lib/h", Target: "/var/lib/strata/state.json", Hard: true})
	s := apply(t, r, items...)
	if len(s) != len(items) {
		t.Fatalf("skipped %q, want all %d items refused", s, len(items))
	}
	for i, p := range []string{"/var/run/x", "/var/run", "/var/lib/strata/state.json", "/var/lib/strata", "/run/x", "/var/lib/h"} {
		if !strings.HasPrefix(s[i], p+": ") || !strings.Contains(s[i], "must not be under") {
			t.Errorf("skipped[%d] = %q, want %s refused", i, s[i], p)
		}
	}
	for _, p := range []string{"var/run", "var/lib/strata", "run", "var/lib/h"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s was written: %v", p, err)
		}
	}
}
