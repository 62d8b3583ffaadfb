package main

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/strata-dev/strata/bootdisk"
)

// diskOptions are what the Job asks of the disk.
type diskOptions struct {
	Image     v1.Image
	Reference string
	Size      int64
	WorkDir   string
}

// makeDisk writes the raw disk of o.Image to out: an ostree sysroot with
// the image deployed, as the VM tier boots it (package bootdisk).
func makeDisk(ctx context.Context, out string, o diskOptions) error {
	return bootdisk.Build(ctx, out, bootdisk.Options{Image: o.Image, Reference: o.Reference, Size: o.Size, WorkDir: o.WorkDir})
}
