package bootdisk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/strata-dev/strata/ostreeimage"
)

// Stateroot is the ostree "os" the image is deployed into: bootc install's
// default.
const Stateroot = "default"

// DefaultSize is the disk's size when Options.Size is 0: room for the
// image and for the later images a node switches to (the file is sparse,
// so only what is written takes space).
const DefaultSize = 4 << 30

// BaseKargs are the kernel arguments every disk boots with, before the
// image's and the caller's: the root is the whole (unpartitioned) first
// virtio disk, and the console is the first serial port.
var BaseKargs = []string{"root=/dev/vda", "rw", "console=ttyS0"}

// Options says what to put on the disk.
type Options struct {
	// Image is the bootable image (bootc's layout: a kernel and an
	// initramfs under /usr/lib/modules/<version>/).
	Image v1.Image
	// Reference is the image by digest (registry/repo@sha256:...), written
	// to bootc's origin file; its digest must be Image's.
	Reference string
	// Kargs are kernel arguments added after BaseKargs and the image's.
	Kargs []string
	// Size is the disk's size in bytes (rounded down to 4 KiB); 0 means
	// DefaultSize.
	Size int64
	// WorkDir is a directory for the sysroot while it is built (on a file
	// system with room for the image twice); empty means a new temporary
	// directory. What Build puts there is removed when it returns.
	WorkDir string
	// Ostree is the ostree command, as an argv prefix; empty means
	// {"ostree"}.
	Ostree []string
}

// Build writes a raw ext4 disk image of o.Image to out (created or
// truncated).
func Build(ctx context.Context, out string, o Options) error {
	ref, err := name.NewDigest(o.Reference)
	if err != nil {
		return fmt.Errorf("boot disk: reference %q is not by digest: %w", o.Reference, err)
	}
	if o.Image == nil {
		return errors.New("boot disk: no image")
	}
	d, err := o.Image.Digest()
	if err != nil {
		return fmt.Errorf("boot disk: image digest: %w", err)
	}
	if d.String() != ref.DigestStr() {
		return fmt.Errorf("boot disk: reference %s does not name the image, whose digest is %s", o.Reference, d)
	}
	size := o.Size
	if size == 0 {
		size = DefaultSize
	}
	size &^= 4095
	if size <= 0 {
		return fmt.Errorf("boot disk: size %d is too small", o.Size)
	}
	ostree := o.Ostree
	if len(ostree) == 0 {
		ostree = []string{"ostree"}
	}

	work, err := os.MkdirTemp(o.WorkDir, "bootdisk-")
	if err != nil {
		return fmt.Errorf("boot disk: %w", err)
	}
	sysroot := filepath.Join(work, "sysroot")
	defer removeSysroot(work, sysroot)

	run := func(argv ...string) error { return run(ctx, argv...) }
	admin := func(args ...string) error {
		return run(append(append(append([]string{}, ostree...), "admin"), append(args, "--sysroot="+sysroot)...)...)
	}
	if err := os.Mkdir(sysroot, 0o755); err != nil {
		return fmt.Errorf("boot disk: %w", err)
	}
	if err := admin("init-fs", sysroot); err != nil {
		return err
	}
	if err := admin("os-init", Stateroot); err != nil {
		return err
	}
	// Imported layer by layer, as bootc does, so that a later switch to
	// an image derived from this one reuses the disk's layer commits.
	repo := ostreeimage.Repo{Path: filepath.Join(sysroot, "ostree", "repo"), Ostree: ostree}
	img, err := repo.Import(ctx, o.Image)
	if err != nil {
		return fmt.Errorf("boot disk: import %s: %w", o.Reference, err)
	}
	if err := syslinuxBootstrap(sysroot); err != nil {
		return fmt.Errorf("boot disk: %w", err)
	}
	origin := filepath.Join(work, "origin")
	if err := os.WriteFile(origin, []byte(ostreeimage.Origin{Image: ref.String()}.String()), 0o644); err != nil {
		return fmt.Errorf("boot disk: %w", err)
	}
	args := []string{"deploy", "--os=" + Stateroot, "--origin-file=" + origin}
	for _, k := range Kargs(img.Kargs, o.Kargs) {
		args = append(args, "--karg="+k)
	}
	if err := admin(append(args, img.Checksum)...); err != nil {
		return err
	}

	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("boot disk: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("boot disk: %w", err)
	}
	// ^64bit: Debian 12's GRUB reads it either way, older bootloaders
	// (extlinux) need it. -E root_owner: the root directory is root's
	// whoever runs this.
	if err := run("mkfs.ext4", "-F", "-q", "-O", "^64bit", "-L", "strata-root", "-E", "root_owner=0:0", "-d", sysroot, out); err != nil {
		return err
	}
	return nil
}

// Kargs is the disk's kernel command line: BaseKargs, then the image's,
// then the caller's.
func Kargs(image, extra []string) []string {
	return append(append(append([]string{}, BaseKargs...), image...), extra...)
}

// syslinuxBootstrap makes ostree pick its syslinux backend and gives it
// the file to replace: /boot/loader is a link to loader.0 that ostree
// swaps at each deployment, and /boot/syslinux/syslinux.cfg (what
// ostree probes for) points into it.
func syslinuxBootstrap(sysroot string) error {
	boot := filepath.Join(sysroot, "boot")
	for _, d := range []string{"loader.0", "syslinux"} {
		if err := os.MkdirAll(filepath.Join(boot, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Symlink("loader.0", filepath.Join(boot, "loader")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(boot, "loader.0", "syslinux.cfg"), nil, 0o644); err != nil {
		return err
	}
	return os.Symlink("../loader/syslinux.cfg", filepath.Join(boot, "syslinux", "syslinux.cfg"))
}

// removeSysroot removes the work directory; ostree makes each deployment's
// directory immutable, which has to be undone first.
func removeSysroot(work, sysroot string) {
	deploys, _ := filepath.Glob(filepath.Join(sysroot, "ostree", "deploy", "*", "deploy", "*"))
	for _, d := range deploys {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			_ = exec.Command("chattr", "-i", d).Run()
		}
	}
	_ = os.RemoveAll(work)
}

// run runs argv, returning an error with the end of its output when it
// fails.
func run(ctx context.Context, argv ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 2000 {
			msg = "..." + msg[len(msg)-2000:]
		}
		return fmt.Errorf("boot disk: %s: %w: %s", strings.Join(argv, " "), err, msg)
	}
	return nil
}
