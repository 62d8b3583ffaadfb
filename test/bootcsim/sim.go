package bootcsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/strata-dev/strata/internal/imageref"
	"github.com/strata-dev/strata/rollout/bootc"

	"github.com/strata-dev/strata/ostreeimage"
)

// Sim is the simulator for one node directory.
type Sim struct {
	// Root is the node's root directory.
	Root string
	// Out receives what bootc would print (progress, "Queued for next
	// boot", ...); nil discards it.
	Out io.Writer
	// Ostree is the ostree binary; "" finds ostree on PATH.
	Ostree string
	// VerifySignatures evaluates --enforce-container-sigpolicy's check
	// (sigverify.Verify); nil refuses every such switch.
	VerifySignatures SignatureVerifier

	// noOverlay makes images add what nodes need in a commit of its own
	// (bootable), never in the image commit (bootOverlay): tests compare.
	noOverlay bool
}

// New returns the simulator of the node directory root.
func New(root string) (*Sim, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	return &Sim{Root: abs}, nil
}

// SwitchOptions are bootc switch's options the simulator takes.
type SwitchOptions struct {
	// Transport is the image transport; only "registry" (or "") is
	// supported.
	Transport string
	// Retain is bootc's --retain (keep the booted image's reference).
	// The simulator keeps the image of every deployment anyway.
	Retain bool
	// DownloadOnly stages the deployment locked: no reboot applies it
	// until --from-downloaded. Only VersionMain's switch has it.
	DownloadOnly bool
	// Apply is --apply: reboot into the new deployment at once (the
	// simulator leaves the request for the harness, see RequestReboot).
	Apply bool
	// SoftReboot is --soft-reboot: prepare a soft reboot into the new
	// deployment when it is capable; "required" fails when it is not.
	SoftReboot bootc.SoftRebootMode
	// EnforceSigPolicy is --enforce-container-sigpolicy: the image must
	// pass the node's /etc/containers/policy.json (sigpolicy.go).
	EnforceSigPolicy bool
}

// links from the node's root into var, as on an image-mode OS.
var varLinks = []struct{ name, target string }{
	{"home", "var/home"},
	{"root", "var/roothome"},
	{"srv", "var/srv"},
	{"opt", "var/opt"},
	{"mnt", "var/mnt"},
	{"media", "var/media"},
}

func (s *Sim) out() io.Writer {
	if s.Out == nil {
		return io.Discard
	}
	return s.Out
}

// BootIDFile is the file holding the current simulated boot's id.
func (s *Sim) BootIDFile() string { return filepath.Join(s.simDir(), bootIDFileName) }

// RebootRequestFile is the file RequestReboot writes and Reboot removes.
func (s *Sim) RebootRequestFile() string { return filepath.Join(s.simDir(), rebootRequestName) }

// BootID is the current simulated boot's id.
func (s *Sim) BootID() (string, error) {
	data, err := os.ReadFile(s.BootIDFile())
	if errors.Is(err, fs.ErrNotExist) {
		return "", ErrNotInitialized
	}
	return strings.TrimSpace(string(data)), err
}

// Init installs image on a new node, as bootc install does: pull, deploy,
// unpack the image's /var once, boot it. Initializing a node again with
// the image it was initialized with does nothing.
func (s *Sim) Init(ctx context.Context, image string) error {
	ref, err := canonicalReference(image)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.simDir(), 0o755); err != nil {
		return err
	}
	unlock, err := s.lock(true)
	if err != nil {
		return err
	}
	defer unlock()

	if st, err := s.loadState(); err == nil {
		v, err := s.view(st)
		if err != nil {
			return err
		}
		if v.booted != nil && v.origins[v.booted.Name].Image == ref {
			return nil
		}
		return fmt.Errorf("%s is already initialized (booted %s)", s.Root, v.origins[v.booted.Name].Image)
	} else if !errors.Is(err, ErrNotInitialized) {
		return err
	}

	if _, err := os.Stat(s.repo()); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(s.sysroot(), 0o755); err != nil {
			return err
		}
		if _, err := s.ostree(ctx, "admin", "init-fs", s.sysroot()); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Dir(s.staterootVar())); errors.Is(err, fs.ErrNotExist) {
		if _, err := s.ostree(ctx, "admin", "os-init", "--sysroot="+s.sysroot(), stateroot); err != nil {
			return err
		}
	}
	st := &state{Images: map[string]imageInfo{}}
	p, err := s.pull(ctx, st, ref)
	if err != nil {
		return err
	}
	d, err := s.deploy(ctx, p.Checksum, p.Info.Kargs, origin{Image: ref}.String())
	if err != nil {
		return err
	}
	// An earlier Init killed after its deploy left one more.
	if err := s.prune(ctx, 1); err != nil {
		return err
	}
	if err := copyVar(filepath.Join(d.Dir, "var"), s.staterootVar()); err != nil {
		return fmt.Errorf("unpack the image's /var: %w", err)
	}
	for _, l := range varLinks {
		mode := fs.FileMode(0o755)
		if l.name == "root" {
			mode = 0o700
		}
		target := filepath.Join(s.staterootVar(), strings.TrimPrefix(l.target, "var/"))
		if err := os.MkdirAll(target, mode); err != nil {
			return err
		}
		if err := replaceSymlink(l.target, filepath.Join(s.Root, l.name)); err != nil {
			return err
		}
	}
	if err := replaceSymlink(filepath.Join("sysroot", "ostree", "deploy", stateroot, "var"), filepath.Join(s.Root, "var")); err != nil {
		return err
	}
	st.Booted = d.Name
	if err := s.saveState(st); err != nil {
		return err
	}
	return s.boot(d)
}

// boot finishes a simulated boot into d: the root's etc and usr links,
// an empty /run and a new boot id (last: it is what tells a reboot).
func (s *Sim) boot(d deployment) error {
	if err := s.linkRoot(d); err != nil {
		return err
	}
	run := filepath.Join(s.Root, "run")
	if err := os.RemoveAll(run); err != nil {
		return err
	}
	if err := os.MkdirAll(run, 0o755); err != nil {
		return err
	}
	if err := os.Remove(s.RebootRequestFile()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return writeFileAtomic(s.BootIDFile(), []byte(newBootID()+"\n"), 0o444)
}

// linkRoot points the root's etc and usr at deployment d.
func (s *Sim) linkRoot(d deployment) error {
	rel := filepath.Join("sysroot", "ostree", "deploy", stateroot, "deploy", d.Name)
	for _, dir := range []string{"etc", "usr"} {
		if err := replaceSymlink(filepath.Join(rel, dir), filepath.Join(s.Root, dir)); err != nil {
			return err
		}
	}
	return nil
}

// copyVar copies the image's /var into the shared /var, never replacing
// what is there: image content under /var is unpacked at install only.
// It copies rather than links: the deployment's files are the ostree
// repository's objects.
func copyVar(src, dst string) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	return filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == src {
				return filepath.SkipDir
			}
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		if _, err := root.Lstat(rel); err == nil {
			return nil // there already; a directory's new entries still come
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		uid, gid := owner(info)
		switch {
		case e.IsDir():
			if err := root.Mkdir(rel, info.Mode().Perm()); err != nil {
				return err
			}
			if err := root.Lchown(rel, uid, gid); err != nil {
				return err
			}
			return root.Chmod(rel, info.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky|fs.ModeSetuid))
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := root.Symlink(target, rel); err != nil {
				return err
			}
			return root.Lchown(rel, uid, gid)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = f.Write(data)
			if err == nil {
				err = f.Chown(uid, gid)
			}
			if err == nil {
				err = f.Chmod(info.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSticky | fs.ModeSetuid))
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		}
		return nil
	})
}

// view is the node as bootc status sees it.
type view struct {
	deps     []deployment
	origins  map[string]origin
	booted   *deployment
	staged   *deployment
	rollback *deployment
	// rollbackQueued: the rollback deployment boots next.
	rollbackQueued bool
}

func (s *Sim) view(st *state) (*view, error) {
	deps, err := s.deployments()
	if err != nil {
		return nil, err
	}
	v := &view{deps: deps, origins: map[string]origin{}}
	for i := range deps {
		d := &deps[i]
		o, err := readOrigin(*d)
		if err != nil {
			return nil, err
		}
		v.origins[d.Name] = o
		if d.Name == st.Booted {
			v.booted = d
		}
	}
	if v.booted == nil {
		return nil, fmt.Errorf("the booted deployment %s is not in the sysroot any more", st.Booted)
	}
	for i := range deps {
		d := &deps[i]
		switch {
		case d == v.booted:
		case v.origins[d.Name].Staged && v.staged == nil:
			v.staged = d
		case v.rollback == nil:
			v.rollback = d
		}
	}
	v.rollbackQueued = v.rollback != nil && v.rollback.Index < v.booted.Index
	return v, nil
}

// Status is what `bootc status --format=json` prints. A node that was
// never initialized is a host bootc does not manage: no booted entry.
func (s *Sim) Status(ctx context.Context) (*bootc.Host, error) {
	h := newHost()
	if _, err := os.Stat(s.simDir()); errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	unlock, err := s.lock(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, err := s.loadState()
	if errors.Is(err, ErrNotInitialized) {
		return h, nil
	}
	if err != nil {
		return nil, err
	}
	v, err := s.view(st)
	if err != nil {
		return nil, err
	}
	entry := func(d *deployment) *bootc.BootEntry {
		if d == nil {
			return nil
		}
		e := &bootc.BootEntry{
			Store:  ptr(bootc.StoreOstreeContainer),
			Ostree: &bootc.OstreeStatus{Stateroot: stateroot, Checksum: d.Checksum, DeploySerial: d.Serial},
		}
		o := v.origins[d.Name]
		// bootc: download-only is "staged and finalization locked";
		// soft-reboot capable is relative to the booted deployment.
		e.DownloadOnly = d == v.staged && o.Locked
		e.SoftRebootCapable = softRebootCapable(st, v, d)
		if o.Image == "" {
			return e
		}
		info := st.Images[d.Checksum]
		ir := bootc.ImageReference{Image: o.Image, Transport: bootc.TransportRegistry}
		if o.Verified {
			ir.Signature = json.RawMessage(`"containerPolicy"`)
		}
		e.Image = &bootc.ImageStatus{
			Image:        ir,
			Version:      info.Version,
			Timestamp:    info.Created,
			ImageDigest:  info.Digest,
			Architecture: info.Architecture,
		}
		return e
	}
	h.Status.Staged = entry(v.staged)
	h.Status.Booted = entry(v.booted)
	h.Status.Rollback = entry(v.rollback)
	h.Status.RollbackQueued = v.rollbackQueued
	if h.Status.Booted.Image != nil {
		h.Status.Type = ptr(bootc.HostTypeBootc)
	}
	spec := h.Status.Booted
	if h.Status.Staged != nil {
		spec = h.Status.Staged
	}
	if spec.Image != nil {
		img := spec.Image.Image
		h.Spec.Image = &img
		if v.rollbackQueued {
			h.Spec.BootOrder = bootc.BootOrderRollback
		}
	}
	return h, nil
}

// Switch is `bootc switch`: pull image and stage it for the next boot.
// Switching to the image the spec already names prints "Image
// specification is unchanged." and changes nothing (changed is false),
// whatever the options (bootc issue 2425: not even a lock).
func (s *Sim) Switch(ctx context.Context, image string, opts SwitchOptions) (changed bool, err error) {
	if opts.Transport != "" && opts.Transport != bootc.TransportRegistry {
		return false, fmt.Errorf("transport %q is not supported by the simulator (only %s)", opts.Transport, bootc.TransportRegistry)
	}
	if err := checkSoftRebootMode(opts.SoftReboot); err != nil {
		return false, err
	}
	ref, err := canonicalReference(image)
	if err != nil {
		return false, err
	}
	st, v, unlock, err := s.open()
	if err != nil {
		return false, err
	}
	defer unlock()
	if opts.DownloadOnly && !st.version().SwitchDownloadOnly() {
		return false, fmt.Errorf("bootc %s: switch has no --download-only", st.version())
	}
	spec := v.origins[v.booted.Name]
	if v.staged != nil {
		spec = v.origins[v.staged.Name]
	}
	// bootc compares the whole image reference, its signature
	// verification included: a switch with --enforce-container-sigpolicy
	// to the image staged without it is a new spec, and verifies.
	if spec.Image == ref && spec.Verified == opts.EnforceSigPolicy {
		fmt.Fprintln(s.out(), "Image specification is unchanged.")
		return false, nil
	}
	if opts.EnforceSigPolicy {
		if err := s.verifySigPolicy(ctx, ref); err != nil {
			return false, err
		}
	}
	if err := s.stage(ctx, st, v, ref, opts.DownloadOnly, opts.EnforceSigPolicy); err != nil {
		return false, err
	}
	return true, s.finishStage(ctx, st, opts.SoftReboot, opts.Apply)
}

// stage pulls ref and deploys it as the staged deployment (locked:
// download-only), replacing a staged one, with bootc's kernel arguments;
// verified says it was fetched under the signature policy.
func (s *Sim) stage(ctx context.Context, st *state, v *view, ref string, locked, verified bool) error {
	p, err := s.pull(ctx, st, ref)
	if err != nil {
		return err
	}
	// Saved before the deploy: status needs the metadata of what is
	// deployed, whenever this is killed.
	if err := s.saveState(st); err != nil {
		return err
	}
	booted, err := s.bootFirst(ctx, v)
	if err != nil {
		return err
	}
	bootedRoot, err := os.OpenRoot(booted.Dir)
	if err != nil {
		return err
	}
	oldKargs, err := ostreeimage.ReadKargs(bootedRoot.FS(), ostreeimage.HostArch())
	_ = bootedRoot.Close()
	if err != nil {
		return fmt.Errorf("kernel arguments of the booted image: %w", err)
	}
	kargs := ostreeimage.MergeKargs(booted.Kargs, oldKargs, p.Info.Kargs)
	if _, err := s.deploy(ctx, p.Checksum, kargs, origin{Image: ref, Staged: true, Locked: locked, Verified: verified}.String()); err != nil {
		return err
	}
	// Staged, booted and rollback stay; older deployments go.
	if err := s.prune(ctx, 3); err != nil {
		return err
	}
	if err := s.gcRefs(ctx, st); err != nil {
		return err
	}
	if err := s.saveState(st); err != nil {
		return err
	}
	if locked {
		fmt.Fprintf(s.out(), "Image downloaded, but will not be applied on reboot: %s\n", ref)
	} else {
		fmt.Fprintf(s.out(), "Queued for next boot: %s\n", ref)
	}
	if p.Info.Version != "" {
		fmt.Fprintf(s.out(), "  Version: %s\n", p.Info.Version)
	}
	fmt.Fprintf(s.out(), "  Digest: %s\n", p.Info.Digest)
	return nil
}

// bootFirst drops the staged deployment and puts the booted one first
// (cancelling a queued rollback), so that ostree's next deploy merges
// /etc and kernel arguments from the booted deployment, as bootc's does.
func (s *Sim) bootFirst(ctx context.Context, v *view) (deployment, error) {
	if v.staged != nil {
		if err := s.undeploy(ctx, v.staged.Name); err != nil {
			return deployment{}, err
		}
	}
	deps, err := s.deployments()
	if err != nil {
		return deployment{}, err
	}
	i := slices.IndexFunc(deps, func(d deployment) bool { return d.Name == v.booted.Name })
	if i < 0 {
		return deployment{}, fmt.Errorf("the booted deployment %s is gone", v.booted.Name)
	}
	if i > 0 {
		booted := deps[i]
		order := append([]deployment{booted}, slices.Delete(slices.Clone(deps), i, i+1)...)
		if err := s.setOrder(order); err != nil {
			return deployment{}, err
		}
		if deps, err = s.deployments(); err != nil {
			return deployment{}, err
		}
	}
	return deps[0], nil
}

// open starts a command that changes the node: it fails on a node never
// installed, takes the exclusive lock and reads the state and the
// deployments. The caller calls unlock.
func (s *Sim) open() (st *state, v *view, unlock func(), err error) {
	if _, err := os.Stat(s.simDir()); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, ErrNotInitialized
	}
	if unlock, err = s.lock(true); err != nil {
		return nil, nil, nil, err
	}
	if st, err = s.loadState(); err == nil {
		v, err = s.view(st)
	}
	if err != nil {
		unlock()
		return nil, nil, nil, err
	}
	return st, v, unlock, nil
}

// Rollback is `bootc rollback`: the rollback deployment boots next and
// the staged one is dropped. Run while a rollback is queued, it reverts
// the queued rollback.
func (s *Sim) Rollback(ctx context.Context) error {
	_, v, unlock, err := s.open()
	if err != nil {
		return err
	}
	defer unlock()
	if v.rollback == nil {
		return errors.New("No rollback available") //nolint:staticcheck // bootc's own message, word for word
	}
	reverting := v.rollbackQueued
	if reverting {
		fmt.Fprintln(s.out(), "notice: Reverting queued rollback state")
	}
	if v.staged != nil {
		if err := s.undeploy(ctx, v.staged.Name); err != nil {
			return err
		}
	}
	deps, err := s.deployments()
	if err != nil {
		return err
	}
	byName := func(name string) deployment {
		i := slices.IndexFunc(deps, func(d deployment) bool { return d.Name == name })
		return deps[i]
	}
	first, second := byName(v.rollback.Name), byName(v.booted.Name)
	if reverting {
		first, second = second, first
	}
	order := []deployment{first, second}
	for _, d := range deps {
		if d.Name != first.Name && d.Name != second.Name {
			order = append(order, d)
		}
	}
	if err := s.setOrder(order); err != nil {
		return err
	}
	if reverting {
		fmt.Fprintln(s.out(), "Next boot: current deployment")
	} else {
		fmt.Fprintf(s.out(), "Next boot: rollback deployment (%s)\n", v.origins[v.rollback.Name].Image)
	}
	return nil
}

// Reboot simulates a clean reboot (the daemon's, or another reboot
// manager's): at shutdown ostree finalizes an unlocked staged deployment
// (it deploys it again, merging /etc from the booted deployment as it is
// now) and the first deployment boots. A locked (download-only) staged
// deployment is not finalized, and ostree drops an unfinalized staged
// deployment: the booted one boots again and the download is gone. The
// root's etc and usr links move, /run is emptied, a new boot id is
// written, the soft-reboot count starts again from 0 and a reboot
// request is removed.
func (s *Sim) Reboot(ctx context.Context) error { return s.reboot(ctx, false) }

// Crash simulates an unplanned reboot without a shutdown (power loss,
// kernel panic, watchdog): nothing is finalized, so any staged
// deployment, locked or not, is dropped and the first deployment boots.
func (s *Sim) Crash(ctx context.Context) error { return s.reboot(ctx, true) }

func (s *Sim) reboot(ctx context.Context, crash bool) error {
	st, v, unlock, err := s.open()
	if err != nil {
		return err
	}
	defer unlock()
	next := v.deps[0]
	if v.staged != nil {
		if crash || v.origins[v.staged.Name].Locked {
			next, err = s.dropStaged(ctx, v)
		} else {
			next, err = s.finalize(ctx, v)
		}
		if err != nil {
			return err
		}
	}
	st.Booted = next.Name
	st.SoftReboots = 0
	if err := s.saveState(st); err != nil {
		return err
	}
	// The booted deployment and the one before it stay.
	if err := s.prune(ctx, 2); err != nil {
		return err
	}
	if err := s.gcRefs(ctx, st); err != nil {
		return err
	}
	if err := s.saveState(st); err != nil {
		return err
	}
	return s.boot(next)
}

// finalize does what ostree does with the staged deployment at shutdown:
// it deploys it again, so that /etc merges from the booted deployment as
// it is now, and drops the first copy. It returns the final deployment.
func (s *Sim) finalize(ctx context.Context, v *view) (deployment, error) {
	staged := *v.staged
	o := v.origins[staged.Name]
	o.Staged, o.Locked = false, false
	if _, err := s.bootFirst(ctx, v); err != nil {
		return deployment{}, err
	}
	d, err := s.deploy(ctx, staged.Checksum, staged.Kargs, o.String())
	if err != nil {
		return deployment{}, fmt.Errorf("finalize the staged deployment: %w", err)
	}
	return d, nil
}

// dropStaged removes the staged deployment, as ostree cleans up one that
// was never finalized, and returns the deployment that boots next.
func (s *Sim) dropStaged(ctx context.Context, v *view) (deployment, error) {
	if err := s.undeploy(ctx, v.staged.Name); err != nil {
		return deployment{}, err
	}
	deps, err := s.deployments()
	if err != nil {
		return deployment{}, err
	}
	if len(deps) == 0 {
		return deployment{}, errors.New("no deployment left to boot")
	}
	return deps[0], nil
}

// RequestReboot is what the simulated node's reboot command does: it
// leaves a request for the harness, which performs the reboot (Reboot).
func (s *Sim) RequestReboot() error { return s.request(RebootFull) }

// RequestSoftReboot is what `systemctl soft-reboot` does on a simulated
// node: it leaves a request for the harness, which performs the soft
// reboot (SoftReboot).
func (s *Sim) RequestSoftReboot() error { return s.request(RebootSoft) }

func (s *Sim) request(kind RebootKind) error {
	if _, err := os.Stat(s.simDir()); errors.Is(err, fs.ErrNotExist) {
		return ErrNotInitialized
	}
	return writeFileAtomic(s.RebootRequestFile(), []byte(string(kind)+"\n"), 0o644)
}

// RebootRequested reports whether a reboot was requested since the last
// simulated boot.
func (s *Sim) RebootRequested() (bool, error) {
	_, err := os.Stat(s.RebootRequestFile())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// FailBoot marks the image with that digest ("sha256:..." or a
// repo@sha256:... reference) as failing its health check after boot.
func (s *Sim) FailBoot(digest string) error {
	if _, d, ok := strings.Cut(digest, "@"); ok {
		digest = d
	}
	if !imageref.ValidDigest(digest) {
		return fmt.Errorf("invalid digest %q: want sha256:<64 hex digits>", digest)
	}
	if _, err := os.Stat(s.simDir()); errors.Is(err, fs.ErrNotExist) {
		return ErrNotInitialized
	}
	unlock, err := s.lock(true)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := s.loadState()
	if err != nil {
		return err
	}
	if !slices.Contains(st.FailingDigests, digest) {
		st.FailingDigests = append(st.FailingDigests, digest)
	}
	return s.saveState(st)
}

// Health is the simulated node's health check: an error when the booted
// image is marked failing.
func (s *Sim) Health(ctx context.Context) error {
	h, err := s.Status(ctx)
	if err != nil {
		return err
	}
	b := h.Status.Booted
	if b == nil || b.Image == nil {
		return ErrNotInitialized
	}
	st, err := s.loadState()
	if err != nil {
		return err
	}
	if slices.Contains(st.FailingDigests, b.Image.ImageDigest) {
		return fmt.Errorf("health check failed: the booted image %s (%s) is marked failing", b.Image.Image.Image, b.Image.ImageDigest)
	}
	return nil
}

// Kargs are the booted deployment's kernel arguments.
func (s *Sim) Kargs(ctx context.Context) ([]string, error) {
	d, err := s.Booted(ctx)
	if err != nil {
		return nil, err
	}
	return d.Kargs, nil
}

// Deployment is a deployment's place on disk.
type Deployment struct {
	// Name is <checksum>.<serial>.
	Name string
	// Dir is the deployment directory (its etc is the node's /etc when
	// booted).
	Dir   string
	Kargs []string
}

// Booted is the booted deployment.
func (s *Sim) Booted(ctx context.Context) (Deployment, error) {
	if _, err := os.Stat(s.simDir()); errors.Is(err, fs.ErrNotExist) {
		return Deployment{}, ErrNotInitialized
	}
	unlock, err := s.lock(false)
	if err != nil {
		return Deployment{}, err
	}
	defer unlock()
	st, err := s.loadState()
	if err != nil {
		return Deployment{}, err
	}
	v, err := s.view(st)
	if err != nil {
		return Deployment{}, err
	}
	return Deployment{Name: v.booted.Name, Dir: v.booted.Dir, Kargs: slices.Clone(v.booted.Kargs)}, nil
}

// Cleanup removes a node directory. ostree makes every deployment
// directory immutable (chattr +i), which os.RemoveAll cannot remove, so
// the flag is cleared first. It is safe on a missing or half-made root.
func Cleanup(root string) error {
	dirs, err := filepath.Glob(filepath.Join(root, "sysroot", "ostree", "deploy", "*", "deploy", "*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		if err := clearImmutable(d); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(root); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
