package bootcsim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-dev/strata/ostreeimage"
)

// stateroot is the ostree "os" every simulated node deploys into.
const stateroot = "strata"

// refPrefix is the ostree branch prefix of the commits the simulator
// deploys: strata/<manifest digest hex> is the image's commit (ostreeimage
// imports it as strata/image/<hex>, its layers as strata/layer/<diffid>),
// with what a simulated node needs added (Sim.bootable).
const refPrefix = stateroot + "/"

// deployment is one ostree deployment of the stateroot, as the boot
// loader entries list it.
type deployment struct {
	// Name is "<checksum>.<serial>", the deployment directory's name.
	Name     string
	Checksum string
	Serial   int
	// Index is the position in ostree's order; 0 is the next boot.
	Index int
	// Dir is the deployment directory.
	Dir string
	// Kargs are the kernel arguments of its boot loader entry, without
	// the ostree= argument ostree adds itself.
	Kargs []string
	// Kernel is the entry's kernel and initramfs ("linux" and "initrd"
	// lines): ostree names their directory after the checksum of both
	// (its bootcsum), so two deployments boot the same kernel and
	// initramfs exactly when these are equal.
	Kernel string

	entry   string // its boot loader entry file
	version int    // the entry's version; the highest boots first
}

func (s *Sim) sysroot() string { return filepath.Join(s.Root, "sysroot") }
func (s *Sim) repo() string    { return filepath.Join(s.sysroot(), "ostree", "repo") }
func (s *Sim) staterootVar() string {
	return filepath.Join(s.sysroot(), "ostree", "deploy", stateroot, "var")
}

// ostree runs the ostree command and returns its standard output. ostree
// prints progress and notes on both streams; they are kept for the error.
func (s *Sim) ostree(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.ostreeBinary(), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var verb []string
		for _, a := range args {
			if !strings.HasPrefix(a, "-") && len(verb) < 2 {
				verb = append(verb, a)
			}
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return "", fmt.Errorf("ostree %s: %w: %s", strings.Join(verb, " "), err, msg)
	}
	return stdout.String(), nil
}

func (s *Sim) ostreeBinary() string {
	if s.Ostree != "" {
		return s.Ostree
	}
	return "ostree"
}

// deployments lists the stateroot's deployments in ostree's order, read
// from the boot loader entries as ostree itself reads them.
func (s *Sim) deployments() ([]deployment, error) {
	entries, err := filepath.Glob(filepath.Join(s.sysroot(), "boot", "loader", "entries", "*.conf"))
	if err != nil {
		return nil, err
	}
	var deps []deployment
	for _, path := range entries {
		d, err := s.readEntry(path)
		if err != nil {
			return nil, err
		}
		if d != nil {
			deps = append(deps, *d)
		}
	}
	sort.SliceStable(deps, func(i, j int) bool { return deps[i].version > deps[j].version })
	for i := range deps {
		deps[i].Index = i
	}
	return deps, nil
}

func (s *Sim) readEntry(path string) (*deployment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		fields[key] = strings.TrimSpace(value)
	}
	version, err := strconv.Atoi(fields["version"])
	if err != nil {
		return nil, fmt.Errorf("boot loader entry %s: version %q: %w", path, fields["version"], err)
	}
	d := &deployment{entry: path, version: version, Kernel: fields["linux"] + " " + fields["initrd"]}
	var bootLink string
	for _, arg := range ostreeimage.SplitKargs(fields["options"]) {
		if v, ok := strings.CutPrefix(arg, "ostree="); ok {
			bootLink = v
			continue
		}
		d.Kargs = append(d.Kargs, arg)
	}
	if bootLink == "" {
		return nil, fmt.Errorf("boot loader entry %s has no ostree= argument", path)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(s.sysroot(), bootLink))
	if err != nil {
		return nil, fmt.Errorf("boot loader entry %s: %w", path, err)
	}
	if filepath.Base(filepath.Dir(filepath.Dir(dir))) != stateroot {
		return nil, nil
	}
	d.Dir = dir
	d.Name = filepath.Base(dir)
	csum, serial, ok := strings.Cut(d.Name, ".")
	if !ok {
		return nil, fmt.Errorf("deployment directory %s: not <checksum>.<serial>", dir)
	}
	d.Checksum = csum
	if d.Serial, err = strconv.Atoi(serial); err != nil {
		return nil, fmt.Errorf("deployment directory %s: %w", dir, err)
	}
	return d, nil
}

var titleIndex = regexp.MustCompile(`\(ostree:[0-9]+`)

// setOrder makes order the boot order, order[0] booting next, by
// rewriting the version (and the index in the title) of each boot loader
// entry in place. ostree 2022.7 has no set-default; ostree sorts the
// entries by version when it loads the sysroot, and its next write of the
// boot loader configuration starts from that order.
func (s *Sim) setOrder(order []deployment) error {
	for i, d := range order {
		data, err := os.ReadFile(d.entry)
		if err != nil {
			return err
		}
		lines := strings.Split(string(data), "\n")
		for j, line := range lines {
			switch {
			case strings.HasPrefix(line, "version "):
				lines[j] = "version " + strconv.Itoa(len(order)-i)
			case strings.HasPrefix(line, "title "):
				lines[j] = titleIndex.ReplaceAllString(line, "(ostree:"+strconv.Itoa(i))
			}
		}
		if err := writeFileAtomic(d.entry, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// undeploy removes a deployment; ostree clears its immutable flag itself.
func (s *Sim) undeploy(ctx context.Context, name string) error {
	deps, err := s.deployments()
	if err != nil {
		return err
	}
	for _, d := range deps {
		if d.Name == name {
			_, err := s.ostree(ctx, "admin", "undeploy", "--sysroot="+s.sysroot(), strconv.Itoa(d.Index))
			return err
		}
	}
	return nil
}

// prune undeploys every deployment from index keep on.
func (s *Sim) prune(ctx context.Context, keep int) error {
	deps, err := s.deployments()
	if err != nil {
		return err
	}
	for i := len(deps) - 1; i >= keep; i-- {
		if _, err := s.ostree(ctx, "admin", "undeploy", "--sysroot="+s.sysroot(), strconv.Itoa(i)); err != nil {
			return err
		}
	}
	return nil
}

// deploy deploys rev as the new first deployment, merging /etc from the
// current first deployment, with exactly kargs and the given origin file
// content. --retain: the simulator decides what to drop, after.
func (s *Sim) deploy(ctx context.Context, rev string, kargs []string, origin string) (deployment, error) {
	f, err := os.CreateTemp(s.simDir(), "origin-*")
	if err != nil {
		return deployment{}, err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.WriteString(origin); err != nil {
		_ = f.Close()
		return deployment{}, err
	}
	if err := f.Close(); err != nil {
		return deployment{}, err
	}
	args := []string{"admin", "deploy", "--sysroot=" + s.sysroot(), "--os=" + stateroot,
		"--retain", "--origin-file=" + f.Name(), "--karg-none"}
	for _, k := range kargs {
		args = append(args, "--karg-append="+k)
	}
	if _, err := s.ostree(ctx, append(args, rev)...); err != nil {
		return deployment{}, err
	}
	deps, err := s.deployments()
	if err != nil {
		return deployment{}, err
	}
	if len(deps) == 0 || deps[0].Checksum != rev {
		return deployment{}, fmt.Errorf("ostree admin deploy %s: the new deployment is not the first one", rev)
	}
	return deps[0], nil
}

// refFile is the file of a local ref of the repository (or the
// directory of a ref prefix): ostree keeps each ref in a file of its own.
func (s *Sim) refFile(ref string) string {
	return filepath.Join(s.repo(), "refs", "heads", filepath.FromSlash(ref))
}

// revParse resolves an ostree ref of the repository; ok is false when the
// ref does not exist.
func (s *Sim) revParse(ref string) (csum string, ok bool, err error) {
	data, err := os.ReadFile(s.refFile(ref))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(string(data)), true, nil
}

// gcRefs deletes the image refs (and forgets the metadata) of images no
// deployment uses any more, as bootc prunes unused images, and the layer
// refs no remaining image has; ostree removes their objects at its next
// prune.
func (s *Sim) gcRefs(ctx context.Context, st *state) error {
	deps, err := s.deployments()
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, d := range deps {
		used[d.Checksum] = true
	}
	dir := s.refFile(stateroot)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var unused []string
	for _, e := range entries {
		if e.IsDir() {
			// ostreeimage's image and layer refs.
			continue
		}
		ref := refPrefix + e.Name()
		csum, _, err := s.revParse(ref)
		if err != nil {
			return err
		}
		if !used[csum] {
			unused = append(unused, ref)
		}
	}
	var keep []string
	for csum, info := range st.Images {
		if !used[csum] {
			delete(st.Images, csum)
			continue
		}
		keep = append(keep, info.Digest)
	}
	// One ostree run deletes both.
	return s.images().RemoveUnused(ctx, keep, unused...)
}

// origin is the content of a deployment's origin file, as bootc writes
// it, plus the simulator's staged and locked markers.
type origin struct {
	// Image is the pull spec; empty when the deployment has no image.
	Image  string
	Staged bool
	// Locked is a staged deployment's finalization lock (download-only):
	// no shutdown finalizes it. ostree keeps the lock beside its staged
	// flag, in /run.
	Locked bool
	// Verified: the image was fetched under the signature policy
	// (switch --enforce-container-sigpolicy), which bootc records in the
	// image reference (ostree-image-signed:docker://...) and reports as
	// the reference's signature "containerPolicy"; an upgrade of it
	// verifies again. ostreeimage reads only unverified references, so
	// the simulator keeps the mark in its own group.
	Verified bool
}

const (
	originStagedLine   = "staged=true"
	originLockedLine   = "download-only=true"
	originVerifiedLine = "sigverify=container-policy"
)

func (o origin) String() string {
	s := ostreeimage.Origin{Image: o.Image}.String()
	if !o.Staged && !o.Verified {
		return s
	}
	s += "\n[bootc-sim]\n"
	if o.Staged {
		// Marks a deployment Switch wrote that no simulated boot has
		// finalized yet (ostree's own staged flag needs a booted system).
		s += originStagedLine + "\n"
		if o.Locked {
			s += originLockedLine + "\n"
		}
	}
	if o.Verified {
		s += originVerifiedLine + "\n"
	}
	return s
}

// writeOrigin replaces d's origin file, as ostree admin set-origin does:
// it lies beside the (immutable) deployment directory.
func writeOrigin(d deployment, o origin) error {
	return writeFileAtomic(d.Dir+".origin", []byte(o.String()), 0o644)
}

func readOrigin(d deployment) (origin, error) {
	data, err := os.ReadFile(d.Dir + ".origin")
	if err != nil {
		return origin{}, err
	}
	var o origin
	// A deployment made without an image (sim init of a bare commit) has
	// none; bootc's own reading of the group is ostreeimage's.
	if oo, err := ostreeimage.ParseOrigin(data); err == nil {
		o.Image = oo.Image
	}
	group := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "["):
			group = strings.Trim(line, "[]")
		case group == "bootc-sim" && line == originStagedLine:
			o.Staged = true
		case group == "bootc-sim" && line == originLockedLine:
			o.Locked = true
		case group == "bootc-sim" && line == originVerifiedLine:
			o.Verified = true
		}
	}
	return o, nil
}
