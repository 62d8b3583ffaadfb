package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// diskOptions are bootdisk.Options (branch i22-vm), field for field.
type diskOptions struct {
	Image     v1.Image
	Reference string
	Size      int64
	WorkDir   string
}

// makeDisk writes the raw disk of o.Image to out.
//
// STAND-IN until package bootdisk (issue 22, branch i22-vm) is in main;
// then this file becomes:
//
//	func makeDisk(ctx context.Context, out string, o diskOptions) error {
//		return bootdisk.Build(ctx, out, bootdisk.Options{Image: o.Image, Reference: o.Reference, Size: o.Size, WorkDir: o.WorkDir})
//	}
//
// This one writes the image's flattened file system into an ext4 file
// system with `mkfs.ext4 -d`, with no ostree sysroot: not bootable, but
// the same file, the same tools and the same failures (an image that does
// not fit), so that the Job, the artifact and the download are tested end
// to end.
func makeDisk(ctx context.Context, out string, o diskOptions) error {
	tree, err := os.MkdirTemp(o.WorkDir, "tree-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tree) }()
	rc := mutate.Extract(o.Image)
	defer func() { _ = rc.Close() }()
	if err := command(ctx, rc, "tar", "-x", "--numeric-owner", "-C", tree); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	err = f.Truncate(o.Size &^ 4095)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return command(ctx, nil, "mkfs.ext4", "-F", "-q", "-O", "^64bit", "-L", "strata-root", "-E", "root_owner=0:0", "-d", tree, out)
}

func command(ctx context.Context, stdin io.Reader, argv ...string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = stdin
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(argv[0]), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}
