package bootdisk

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// imported is what the deployment needs of an imported image (the fields
// of ostreeimage.Image that Build uses).
type imported struct {
	// Checksum is the image's ostree commit.
	Checksum string
	// Kargs are the image's kernel arguments (usr/lib/bootc/kargs.d).
	Kargs []string
}

// importImage imports img into the ostree repository repo.
//
// STAND-IN until ostreeimage (issue 22, branch i22-ostree) is merged, then
// replaced by ostreeimage.Repo{Path: repo, Ostree: ostree}.Import, which
// commits layer by layer (so a derived image reuses the disk's layer
// commits) and reads the image's kargs.d. This one commits the flattened
// image in one commit, with bootc's /etc -> /usr/etc move, and no kargs.
func importImage(ctx context.Context, ostree []string, repo string, img v1.Image) (*imported, error) {
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	tree, err := os.MkdirTemp(filepath.Dir(filepath.Dir(filepath.Dir(repo))), "tree-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tree)
	rc := mutate.Extract(img)
	defer rc.Close()
	var stderr bytes.Buffer
	tar := exec.CommandContext(ctx, "tar", "-x", "--numeric-owner", "--same-permissions", "--xattrs", "--xattrs-include=*", "-C", tree, "-f", "-")
	tar.Stdin, tar.Stderr = rc, &stderr
	if err := tar.Run(); err != nil {
		return nil, fmt.Errorf("unpack: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if _, err := os.Lstat(filepath.Join(tree, "usr", "etc")); err == nil {
		return nil, fmt.Errorf("the image has a /usr/etc, which bootc's layout keeps for the import")
	}
	if err := os.Rename(filepath.Join(tree, "etc"), filepath.Join(tree, "usr", "etc")); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var out bytes.Buffer
	argv := append(append([]string{}, ostree...), "commit", "--repo="+repo,
		"--branch=strata/image/"+d.Hex, "--tree=dir="+tree,
		"--add-metadata-string=ostree.manifest-digest="+d.String())
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	stderr.Reset()
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ostree commit: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return &imported{Checksum: strings.TrimSpace(out.String())}, nil
}
