package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/diskartifact"
	"github.com/strata-dev/strata/internal/referrers"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/scheme"
)

type bootDiskOptions struct {
	status         statusOptions
	pool, image    string
	output         string
	registryConfig string
	insecure       bool
}

func newBootDiskCommand() *cobra.Command {
	o := &bootDiskOptions{}
	cmd := &cobra.Command{
		Use:   "boot-disk (MOSB | --pool POOL | --image IMAGE) -o FILE [--registry-config FILE] [--insecure]",
		Short: "Download the boot disk of a build, or of a pool's current image, as a raw disk file",
		Long: `boot-disk downloads the raw boot disk a MachineOSBuild made of its image
(the MachineOSConfig's spec.bootDisk): an ext4 file system holding an
ostree sysroot with the image deployed, for new nodes to boot straight into
the pool's image. It is published beside the image as an OCI artifact
(artifact type ` + v1alpha1.BootDiskArtifactType + `), zstd-compressed.

Which disk: a MachineOSBuild's (its status.bootDisk.artifact); with --pool,
the disk of the image a new node of the pool gets (the pool's
status.newNodes.image, else its MachineOSConfig's
status.currentImagePullSpec), as the build that made it recorded it, else
found among the image's referrers; with --image, the one attached to that
image (repository@sha256:...), without asking the cluster. A node booted
from the pool's disk runs the pool's image at once: its first boot
switches to nothing and does not reboot.

The artifact is taken only if it is a referrer of the image: in the
image's repository, with the image's digest as its subject (a build's
status.bootDisk is believed only as far as the registry agrees). The
compressed blob is checked against its digest as it is read, and the
disk, decompressed, against the size and sha256 digest its artifact
records; FILE is written sparse and appears only once it verified.

Credentials are read from --registry-config (a Docker config.json or a
containers auth.json), else as docker and podman find them. --insecure
reaches the registry over plain HTTP.`,
		Example: `  # The disk of the worker pool's current image
  stratactl boot-disk --pool worker -o worker.raw

  # The disk of one build, with the credentials of the push secret
  stratactl boot-disk worker-4f2c0a9d1e7b -o disk.raw --registry-config push-auth.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			build := ""
			if len(args) == 1 {
				build = args[0]
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), build)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.status.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&o.pool, "pool", "", "the pool whose current image's disk to download")
	f.StringVar(&o.image, "image", "", "the image (repository@sha256:...) whose disk to download, found in the registry")
	f.StringVarP(&o.output, "output", "o", "", "the file to write (required)")
	f.StringVar(&o.registryConfig, "registry-config", "", "registry credentials: a Docker config.json or containers auth.json (default: as docker and podman find them)")
	f.BoolVar(&o.insecure, "insecure", false, "reach the registry over plain HTTP")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func (o *bootDiskOptions) run(ctx context.Context, out, progress io.Writer, build string) error {
	n := 0
	for _, s := range []string{build, o.pool, o.image} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return errors.New("name one of a MachineOSBuild, --pool or --image")
	}
	var kc authn.Keychain = authn.DefaultKeychain
	if o.registryConfig != "" {
		var err error
		if kc, err = registry.KeychainFromFile(o.registryConfig); err != nil {
			return err
		}
	}
	rc := registry.Client{}
	image, artifact, from := o.image, "", ""
	if image == "" {
		cfg, err := o.status.restConfig()
		if err != nil {
			return err
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		if err != nil {
			return err
		}
		if image, artifact, from, err = bootDiskOf(ctx, c, build, o.pool); err != nil {
			return err
		}
	}
	if o.insecure {
		ref, err := rc.ParseReference(image)
		if err != nil {
			return fmt.Errorf("image %q: %w", image, err)
		}
		rc.Insecure = []string{ref.Context().RegistryStr()}
	}
	if artifact == "" {
		d, ok, err := diskartifact.Find(ctx, referrers.Client{Registry: rc}, image, kc)
		if err != nil {
			return fmt.Errorf("find the boot disk of %s: %w", image, registry.Explain(err))
		}
		if !ok {
			return fmt.Errorf("image %s has no boot disk attached (no referrer of type %s)", image, v1alpha1.BootDiskArtifactType)
		}
		artifact = d.Artifact
		if err := checkBootDiskOf(rc, image, d); err != nil {
			return fmt.Errorf("the boot disk the registry lists for %s: %w", image, err)
		}
	} else {
		d, _, err := diskartifact.Describe(ctx, rc, artifact, kc)
		if err != nil {
			return fmt.Errorf("MachineOSBuild %s: status.bootDisk.artifact: %w", from, registry.Explain(err))
		}
		// Whoever may write the build's status chooses this reference: a
		// disk is the image's only if the registry says so.
		if err := checkBootDiskOf(rc, image, d); err != nil {
			return fmt.Errorf("MachineOSBuild %s: status.bootDisk.artifact: %w", from, err)
		}
	}
	start, last := time.Now(), time.Now()
	d, err := diskartifact.Download(ctx, rc, artifact, kc, o.output, func(n int64) {
		if time.Since(last) >= 2*time.Second {
			last = time.Now()
			fmt.Fprintf(progress, "%d MiB downloaded\n", n>>20)
		}
	})
	if err != nil {
		return fmt.Errorf("download %s: %w", artifact, registry.Explain(err))
	}
	fmt.Fprintf(out, "Wrote %s: the boot disk of %s, %d bytes (%s), from %s (%d bytes) in %s\n",
		o.output, d.Image, d.Size, d.RawDigest, d.Artifact, d.CompressedSize, time.Since(start).Round(time.Millisecond))
	return nil
}

// checkBootDiskOf refuses the disk artifact d unless it is a referrer of
// image (repository@sha256:…): in the image's repository and with the
// image as its subject. A node booted from it runs what the disk holds,
// and a disk's artifact can be pushed beside any image by anyone who can
// push, so a reference alone (a build's status.bootDisk) proves nothing.
func checkBootDiskOf(rc registry.Client, image string, d diskartifact.Disk) error {
	ref, err := rc.ParseReference(image)
	if err != nil {
		return fmt.Errorf("image %q: %w", image, err)
	}
	img, ok := ref.(name.Digest)
	if !ok {
		return fmt.Errorf("image %s is not by digest (repository@sha256:…): no boot disk can be checked against it", image)
	}
	aref, err := rc.ParseReference(d.Artifact)
	if err != nil {
		return fmt.Errorf("artifact %q: %w", d.Artifact, err)
	}
	notOf := fmt.Sprintf("artifact %s is not a boot disk of image %s", d.Artifact, image)
	if d.Image == "" {
		return fmt.Errorf("%s: it has no subject", notOf)
	}
	if repo := aref.Context().Name(); repo != img.Context().Name() {
		return fmt.Errorf("%s: it is in repository %s, not the image's %s", notOf, repo, img.Context().Name())
	}
	subject, err := rc.ParseReference(d.Image)
	if err != nil {
		return fmt.Errorf("%s: its subject %q: %w", notOf, d.Image, err)
	}
	if s, ok := subject.(name.Digest); !ok || s.DigestStr() != img.DigestStr() {
		return fmt.Errorf("%s: its subject is %s", notOf, d.Image)
	}
	return nil
}

// bootDiskOf finds the image and, when the cluster knows it, the boot
// disk artifact of a build, or of a pool's current image ("" when the
// build that made the image has none recorded: the registry may still
// have one), and the build whose status named the artifact. What keeps a
// build from having a disk is said in its words.
func bootDiskOf(ctx context.Context, c client.Client, build, pool string) (image, artifact, from string, err error) {
	if pool != "" {
		p := &v1alpha1.MachineConfigPool{}
		if err := c.Get(ctx, client.ObjectKey{Name: pool}, p); err != nil {
			return "", "", "", fmt.Errorf("pool %s: %w", pool, err)
		}
		name := p.Annotations[v1alpha1.LayeredByAnnotation]
		if name == "" {
			return "", "", "", fmt.Errorf("pool %s is not layered: no MachineOSConfig builds its image", pool)
		}
		mosc := &v1alpha1.MachineOSConfig{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, mosc); err != nil {
			return "", "", "", fmt.Errorf("MachineOSConfig %s of pool %s: %w", name, pool, err)
		}
		// What a new node switches to at its first boot: a disk of it
		// boots a node that needs no switch and no reboot. Before the
		// rollout controller says (a pool without nodes yet), the
		// MachineOSConfig's current image.
		image = mosc.Status.CurrentImagePullSpec
		if p.Status.NewNodes != nil && p.Status.NewNodes.Image != "" {
			image = p.Status.NewNodes.Image
		}
		if image == "" {
			return "", "", "", fmt.Errorf("pool %s has no current image yet (MachineOSConfig %s)", pool, name)
		}
		var builds v1alpha1.MachineOSBuildList
		if err := c.List(ctx, &builds, client.MatchingLabels{v1alpha1.MachineOSConfigLabel: name}); err != nil {
			return "", "", "", fmt.Errorf("builds of MachineOSConfig %s: %w", name, err)
		}
		for _, b := range builds.Items {
			if bd := b.Status.BootDisk; bd != nil && bd.Artifact != "" && b.Status.DigestedImagePushSpec == image {
				return image, bd.Artifact, b.Name, nil
			}
		}
		if mosc.Spec.BootDisk == nil {
			return "", "", "", fmt.Errorf("pool %s's MachineOSConfig %s has no spec.bootDisk: its builds make no boot disk", pool, name)
		}
		// Made by a build the history no longer keeps, or not yet: the
		// registry says.
		return image, "", "", nil
	}
	b := &v1alpha1.MachineOSBuild{}
	if err := c.Get(ctx, client.ObjectKey{Name: build}, b); err != nil {
		return "", "", "", fmt.Errorf("MachineOSBuild %s: %w", build, err)
	}
	if bd := b.Status.BootDisk; bd != nil && bd.Artifact != "" {
		return b.Status.DigestedImagePushSpec, bd.Artifact, b.Name, nil
	}
	if cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildBootDisk); cond != nil {
		return "", "", "", fmt.Errorf("MachineOSBuild %s has no boot disk: %s %s: %s", build, cond.Type, cond.Reason, cond.Message)
	}
	return "", "", "", fmt.Errorf("MachineOSBuild %s has no boot disk (its MachineOSConfig %s makes one with spec.bootDisk, once the build succeeded)", build, b.Spec.MachineOSConfig.Name)
}
