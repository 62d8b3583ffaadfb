package main

import (
	"context"
	"encoding/json"
	"errors"
	goflag "flag"
	"fmt"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/firstboot"
	"github.com/strata-dev/strata/rollout/hostfs"
)

type firstbootOptions struct {
	hostRoot      string
	image         string
	authFile      string
	stateDir      string
	bootcCommand  string
	rebootCommand string
	healthCommand string
	healthTimeout time.Duration
	bootIDFile    string
	// signaturePolicyFile holds the imageSignaturePolicy annotation's
	// value (a host path).
	signaturePolicyFile string
	zap                 zap.Options
}

// newFirstbootCommand is `strata-daemon firstboot`, which
// strata-firstboot.service runs before the kubelet (package firstboot).
func newFirstbootCommand() *cobra.Command {
	var o firstbootOptions
	cmd := &cobra.Command{
		Use:   "firstboot",
		Short: "A new node's first boot: switch to the pool's image by digest before the kubelet starts, rebooting once",
		Long: `firstboot runs from strata-firstboot.service, which the config server
serves in a pool's first-boot Ignition, before kubelet.service. It switches the
node to --image with bootc (by digest, with the pull secret the config server
delivered; with --signature-policy-file, the pool's signature policy written
into /etc and enforced, as the daemon's own switches are), reboots once,
verifies the booted digest and the node's health, and exits 0 only then; a node installed with --image does not reboot. It
needs no API server. While the reboot it asked for is under way it does not
exit, so that nothing ordered after it starts.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("state-dir") {
				o.stateDir = filepath.Join(o.hostRoot, "var", "lib", "strata")
			}
			return runFirstboot(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.hostRoot, "host-root", "/", "the host's root directory; every host path is under it")
	f.StringVar(&o.image, "image", "", "the pool's image, repository@sha256:<digest> (required)")
	f.StringVar(&o.authFile, "auth-file", "", "host path of the node pull secret (dockerconfigjson) the config server delivered; written where bootc reads it, removed when done")
	f.StringVar(&o.stateDir, "state-dir", "", "the daemon's state directory (default <host-root>/var/lib/strata)")
	f.StringVar(&o.bootcCommand, "bootc-command", "nsenter --target 1 --mount --pid -- bootc", "bootc command, split at white space")
	f.StringVar(&o.rebootCommand, "reboot-command", "nsenter --target 1 --mount --pid -- systemctl reboot", "reboot command, split at white space")
	f.StringVar(&o.healthCommand, "health-check-command", "", "health check after the switch's reboot, split at white space; exit 0 means healthy (empty: none)")
	f.DurationVar(&o.healthTimeout, "health-check-timeout", 10*time.Minute, "how long the node may take to be healthy on the new image")
	f.StringVar(&o.bootIDFile, "boot-id-file", "/proc/sys/kernel/random/boot_id", "file holding the id of the running boot")
	f.StringVar(&o.signaturePolicyFile, "signature-policy-file", "", "for a pool that signs its images, host path of the node signature policy (the imageSignaturePolicy annotation's JSON) the config server delivered: written into /etc and enforced by the switch (bootc switch --enforce-container-sigpolicy); an image it refuses fails the first boot")
	zfs := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	o.zap.BindFlags(zfs)
	f.AddGoFlagSet(zfs)
	return cmd
}

func runFirstboot(o firstbootOptions) error {
	if o.image == "" {
		return errors.New("--image is required")
	}
	if o.healthTimeout <= 0 {
		return errors.New("--health-check-timeout must be positive")
	}
	bc, err := bootc.NewCommand(o.bootcCommand)
	if err != nil {
		return fmt.Errorf("--bootc-command: %w", err)
	}
	reboot := strings.Fields(o.rebootCommand)
	if len(reboot) == 0 {
		return errors.New("--reboot-command is empty")
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	root, err := hostfs.Open(o.hostRoot)
	if err != nil {
		return fmt.Errorf("--host-root: %w", err)
	}
	defer root.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var policy *v1alpha1.NodeSignaturePolicy
	if o.signaturePolicyFile != "" {
		data, err := root.ReadFile(o.signaturePolicyFile)
		if err != nil {
			return fmt.Errorf("--signature-policy-file: %w", err)
		}
		policy = &v1alpha1.NodeSignaturePolicy{}
		if err := json.Unmarshal(data, policy); err != nil {
			return fmt.Errorf("--signature-policy-file %s: %w", o.signaturePolicyFile, err)
		}
	}
	b := &firstboot.Boot{
		SignaturePolicy: policy,
		Enforcing:       bc,
		Bootc:           bc,
		Machine:         &rollout.Commands{BootIDFile: o.bootIDFile, RebootArgv: reboot, HealthArgv: strings.Fields(o.healthCommand)},
		Root:            root,
		AuthFile:        o.authFile,
		StateDir:        o.stateDir,
		Image:           o.image,
		HealthTimeout:   o.healthTimeout,
		Log:             ctrl.Log.WithName("firstboot"),
	}
	out, err := b.Run(ctx)
	if err != nil {
		return err
	}
	if out == firstboot.Rebooting {
		// The reboot ends this process; exiting first would let units
		// ordered after this one (the kubelet) start on the old image.
		<-ctx.Done()
		return errors.New("stopped while the reboot into the pool's image was under way")
	}
	return nil
}
