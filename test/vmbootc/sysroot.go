package vmbootc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/strata-dev/strata/ostreeimage"
)

// System is one ostree system as bootc sees it. The zero value of each
// field is the booted guest's.
type System struct {
	// Sysroot is the physical root holding ostree/ and boot/: "/sysroot"
	// on a booted system.
	Sysroot string
	// Root is the directory that is "/": the booted deployment is the
	// one whose directory has its device and inode. A test points it at
	// a deployment directory to "boot" it.
	Root string
	// Run is /run: ostree-booted, ostree/staged-deployment, the auth file.
	Run string
	// Live: ostree admin runs on the booted system (no --sysroot) and
	// stages with deploy --stage. Otherwise it runs with --sysroot and
	// deploys at once, and the staged deployment is recorded in
	// Run/ostree/staged-deployment by this program (host tests).
	Live bool
	// Ostree is the ostree command; default {"ostree"}.
	Ostree []string
	// Out receives bootc's messages (stdout); nil discards them.
	Out io.Writer
}

// Guest is the System of the booted VM.
func Guest() *System {
	return &System{Sysroot: "/sysroot", Root: "/", Run: "/run", Live: true}
}

const (
	// bootedFlag exists on a system ostree booted (ostree-prepare-root).
	bootedFlag = "ostree-booted"
	// stagedFile is where ostree keeps the staged deployment (relative to
	// Run) until ostree-finalize-staged writes it at shutdown.
	stagedFile = "ostree/staged-deployment"
	// stagedLockedFile locks the staged deployment's finalization.
	stagedLockedFile = "ostree/staged-deployment-locked"
)

func (s *System) repo() string { return filepath.Join(s.Sysroot, "ostree", "repo") }

func (s *System) out() io.Writer {
	if s.Out == nil {
		return io.Discard
	}
	return s.Out
}

func (s *System) ostreeArgv() []string {
	if len(s.Ostree) > 0 {
		return s.Ostree
	}
	return []string{"ostree"}
}

// lock takes the exclusive lock of the commands that change the
// sysroot, until unlock: each ostree admin command locks the sysroot,
// but a switch or a rollback is several (undeploy, deploy, undeploy),
// and the daemon and the boot check may run bootc at the same time.
func (s *System) lock() (unlock func(), err error) {
	if err := os.MkdirAll(s.Run, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(s.Run, "bootc.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { _ = f.Close() }, nil
}

// lockBooted takes the lock and reads the sysroot of a booted system,
// as every command that changes it starts: bootc refuses to change a
// system ostree did not boot.
func (s *System) lockBooted() (v *view, unlock func(), err error) {
	if unlock, err = s.lock(); err != nil {
		return nil, nil, err
	}
	if v, err = s.view(); err == nil && v.booted == nil {
		err = ErrNotBooted
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return v, unlock, nil
}

// admin runs `ostree admin VERB` on the system's sysroot.
func (s *System) admin(ctx context.Context, verb string, args ...string) (string, error) {
	a := []string{"admin", verb}
	if !s.Live {
		a = append(a, "--sysroot="+s.Sysroot)
	}
	return s.ostree(ctx, append(a, args...)...)
}

// ostree runs the ostree command and returns its standard output; its
// error carries ostree's message.
func (s *System) ostree(ctx context.Context, args ...string) (string, error) {
	return runOstree(ctx, s.ostreeArgv(), args...)
}

func runOstree(ctx context.Context, argv []string, args ...string) (string, error) {
	all := append(append([]string(nil), argv[1:]...), args...)
	cmd := exec.CommandContext(ctx, argv[0], all...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		verb := strings.Join(args[:min(2, len(args))], " ")
		return "", fmt.Errorf("ostree %s: %w: %s", verb, err, msg)
	}
	return stdout.String(), nil
}

// Deployment is one ostree deployment of the sysroot.
type Deployment struct {
	// Stateroot is ostree's "os" of the deployment.
	Stateroot string
	// Checksum is the deployed commit; Serial tells apart deployments
	// of the same commit.
	Checksum string
	Serial   int
	// Index is the position in ostree's order (`ostree admin status`,
	// `ostree admin undeploy INDEX`): the staged deployment first, then
	// the boot loader entries, 0 booting next.
	Index int
	// Dir is the deployment directory.
	Dir string
	// Kargs are its boot loader entry's kernel arguments without the
	// ostree= one ostree adds; nil for a staged deployment in a live
	// system (ostree keeps them in the staged file until finalization).
	Kargs []string
	// Entry is its boot loader entry file; "" for a deployment that has
	// none yet (staged in a live system).
	Entry string
	// Booted, Staged: what ostree would say of it.
	Booted, Staged bool
	// Origin is its origin file's content.
	Origin ostreeimage.Origin
}

// Name is the deployment directory's name, <checksum>.<serial>.
func (d *Deployment) Name() string { return d.Checksum + "." + strconv.Itoa(d.Serial) }

// Deployments lists the sysroot's deployments in ostree's order. The
// staged one comes first, as ostree lists it.
func (s *System) Deployments() ([]Deployment, error) {
	entries, err := filepath.Glob(filepath.Join(s.Sysroot, "boot", "loader", "entries", "*.conf"))
	if err != nil {
		return nil, err
	}
	type entry struct {
		d       Deployment
		version int
	}
	var listed []entry
	inEntries := map[string]bool{}
	for _, path := range entries {
		d, version, err := s.readEntry(path)
		if err != nil {
			return nil, err
		}
		listed = append(listed, entry{d, version})
		inEntries[d.Dir] = true
	}
	sort.SliceStable(listed, func(i, j int) bool { return listed[i].version > listed[j].version })

	var deps []Deployment
	staged, err := s.stagedDeployment(inEntries)
	if err != nil {
		return nil, err
	}
	if staged != nil {
		deps = append(deps, *staged)
	}
	for _, e := range listed {
		if staged != nil && e.d.Dir == staged.Dir {
			// Deployed at once (a directory sysroot): its entry has
			// its arguments.
			deps[0].Kargs, deps[0].Entry = e.d.Kargs, e.d.Entry
			continue
		}
		deps = append(deps, e.d)
	}
	booted, err := s.bootedDir()
	if err != nil {
		return nil, err
	}
	for i := range deps {
		d := &deps[i]
		d.Index = i
		d.Booted = booted != nil && sameFile(booted, d.Dir)
		if d.Origin, err = readOrigin(d.Dir + ".origin"); err != nil {
			return nil, err
		}
	}
	return deps, nil
}

// readEntry reads a boot loader entry: its version (the highest boots
// first) and the deployment its ostree= argument names.
func (s *System) readEntry(path string) (Deployment, int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Deployment{}, 0, err
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		fields[key] = strings.TrimSpace(value)
	}
	version, err := strconv.Atoi(fields["version"])
	if err != nil {
		return Deployment{}, 0, fmt.Errorf("boot loader entry %s: version %q: %w", path, fields["version"], err)
	}
	d := Deployment{Entry: path}
	var bootLink string
	for _, arg := range ostreeimage.SplitKargs(fields["options"]) {
		if v, ok := strings.CutPrefix(arg, "ostree="); ok {
			bootLink = v
			continue
		}
		d.Kargs = append(d.Kargs, arg)
	}
	if bootLink == "" {
		return Deployment{}, 0, fmt.Errorf("boot loader entry %s has no ostree= argument", path)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(s.Sysroot, bootLink))
	if err != nil {
		return Deployment{}, 0, fmt.Errorf("boot loader entry %s: %w", path, err)
	}
	if err := d.setDir(dir); err != nil {
		return Deployment{}, 0, fmt.Errorf("boot loader entry %s: %w", path, err)
	}
	return d, version, nil
}

// setDir fills the deployment's identity from its directory,
// ostree/deploy/<stateroot>/deploy/<checksum>.<serial>.
func (d *Deployment) setDir(dir string) error {
	csum, serial, ok := strings.Cut(filepath.Base(dir), ".")
	if !ok || filepath.Base(filepath.Dir(dir)) != "deploy" {
		return fmt.Errorf("deployment directory %s: not deploy/<checksum>.<serial>", dir)
	}
	n, err := strconv.Atoi(serial)
	if err != nil {
		return fmt.Errorf("deployment directory %s: %w", dir, err)
	}
	d.Dir, d.Checksum, d.Serial = dir, csum, n
	d.Stateroot = filepath.Base(filepath.Dir(filepath.Dir(dir)))
	return nil
}

// stagedDeployment is the deployment ostree's staged file names, when
// there is one. The file is a GVariant whose target carries the commit
// checksum as a plain string; the deployment is the directory of that
// commit with no boot loader entry (ostree writes the entry at
// finalization), or, in a directory sysroot where this program deployed
// it at once, the one whose name the file holds.
func (s *System) stagedDeployment(inEntries map[string]bool) (*Deployment, error) {
	data, err := os.ReadFile(filepath.Join(s.Run, stagedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	dirs, err := filepath.Glob(filepath.Join(s.Sysroot, "ostree", "deploy", "*", "deploy", "*.*"))
	if err != nil {
		return nil, err
	}
	var best *Deployment
	for _, dir := range dirs {
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue
		}
		var d Deployment
		if d.setDir(dir) != nil || !bytes.Contains(data, []byte(d.Checksum)) {
			continue
		}
		if !s.Live && strings.TrimSpace(string(data)) != d.Name() {
			continue
		}
		if s.Live && inEntries[dir] {
			continue
		}
		if best == nil || d.Serial > best.Serial {
			d := d
			best = &d
		}
	}
	if best != nil {
		best.Staged = true
	}
	return best, nil
}

// bootedDir is the root's file info when the system was booted by
// ostree, nil otherwise.
func (s *System) bootedDir() (fs.FileInfo, error) {
	if _, err := os.Stat(filepath.Join(s.Run, bootedFlag)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return os.Stat(s.Root)
}

// sameFile: ostree's test for the booted deployment, the device and inode
// of "/" against each deployment directory's.
func sameFile(root fs.FileInfo, dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		return false
	}
	a, ok1 := root.Sys().(*syscall.Stat_t)
	b, ok2 := fi.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && a.Dev == b.Dev && a.Ino == b.Ino
}
