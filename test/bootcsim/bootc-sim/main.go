// Command bootc-sim is a bootc stand-in for tests: it answers the bootc
// commands the Strata daemon runs (status, switch, upgrade, rollback) for
// one simulated node directory, as the node's bootc release (sim
// bootc-version) would, refusing what that release's parser refuses,
// plus "sim" commands that stand in for the install, the reboots (clean,
// soft, crash), the node's systemctl and the health check. See package
// bootcsim.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/bootcsim"
)

// rootEnv names the node directory when --sim-root is not given.
const rootEnv = "BOOTC_SIM_ROOT"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exitError carries an exit status and a message printed without the
// "error: " prefix.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand(stdout)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			fmt.Fprintln(stderr, ee.msg)
			return ee.code
		}
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

func newCommand(stdout io.Writer) *cobra.Command {
	var simRoot string
	sim := func() (*bootcsim.Sim, error) {
		root := simRoot
		if root == "" {
			root = os.Getenv(rootEnv)
		}
		if root == "" {
			return nil, fmt.Errorf("no node directory: set --sim-root or %s", rootEnv)
		}
		s, err := bootcsim.New(root)
		if err != nil {
			return nil, err
		}
		s.Out = stdout
		s.VerifySignatures = helperVerifier(s.Root)
		return s, nil
	}

	root := &cobra.Command{
		Use:   "bootc-sim",
		Short: "A bootc simulator on an ostree sysroot per node directory, for tests",
		Long: `bootc-sim behaves like bootc for status, switch and rollback on the
simulated node whose directory is --sim-root (default $` + rootEnv + `).
Images are really pulled, committed and deployed into the node's ostree
sysroot; the "sim" commands install, reboot and health-check the node.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.PersistentFlags().StringVar(&simRoot, "sim-root", "", "the simulated node's directory (default $"+rootEnv+")")

	var format string
	var jsonAlias, bootedOnly bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Display the status of the host (bootc status)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := sim()
			if err != nil {
				return err
			}
			h, err := s.Status(cmd.Context())
			if err != nil {
				return err
			}
			if bootedOnly {
				h.Status.Staged, h.Status.Rollback = nil, nil
			}
			if jsonAlias {
				format = "json"
			}
			return printStatus(stdout, h, format)
		},
	}
	status.Flags().StringVar(&format, "format", "yaml", "output format: json, yaml or humanreadable")
	status.Flags().BoolVar(&jsonAlias, "json", false, "output JSON (older alias of --format=json)")
	_ = status.Flags().MarkHidden("json")
	status.Flags().BoolVar(&bootedOnly, "booted", false, "only display the booted deployment")

	var opts bootcsim.SwitchOptions
	var softReboot string
	var switchFromDownloaded bool
	switchCmd := &cobra.Command{
		Use:   "switch [--transport registry] [--retain] [--apply] [--soft-reboot MODE] IMAGE",
		Short: "Target a new container image reference to boot (bootc switch)",
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := sim()
			if err != nil {
				return err
			}
			v, err := s.BootcVersion()
			if err != nil {
				return err
			}
			// clap refuses an option the release does not have before
			// anything else, as an unexpected argument.
			if !v.SwitchDownloadOnly() {
				for _, f := range []string{"download-only", "from-downloaded"} {
					if cmd.Flags().Changed(f) {
						return clapUnexpected(cmd, "--"+f)
					}
				}
			}
			mode, err := parseSoftReboot(softReboot)
			if err != nil {
				return err
			}
			switch {
			case opts.DownloadOnly && opts.Apply:
				return clapConflict(cmd, "--apply")
			case opts.DownloadOnly && switchFromDownloaded:
				return clapConflict(cmd, "--from-downloaded")
			}
			if switchFromDownloaded {
				// The target is optional then (PR 2342), and ignored.
				if len(args) > 1 {
					return clapUnexpected(cmd, args[1])
				}
				return s.Upgrade(cmd.Context(), bootcsim.UpgradeOptions{FromDownloaded: true, Apply: opts.Apply, SoftReboot: mode})
			}
			if len(args) != 1 {
				return clapMissingTarget(cmd, args)
			}
			opts.SoftReboot = mode
			_, err = s.Switch(cmd.Context(), args[0], opts)
			return err
		},
	}
	switchCmd.Flags().StringVar(&opts.Transport, "transport", bootc.TransportRegistry, "the image transport; only registry")
	switchCmd.Flags().BoolVar(&opts.Retain, "retain", false, "retain the booted image's reference (accepted; the simulator keeps it anyway)")
	switchCmd.Flags().BoolVar(&opts.Apply, "apply", false, "restart or reboot into the new target image")
	switchCmd.Flags().StringVar(&softReboot, "soft-reboot", "", "configure soft reboot behavior: required or auto")
	switchCmd.Flags().BoolVar(&opts.EnforceSigPolicy, "enforce-container-sigpolicy", false, "enforce that /etc/containers/policy.json includes a default policy which requires signatures")
	switchCmd.Flags().BoolVar(&opts.DownloadOnly, "download-only", false, "download and stage the image without applying it")
	switchCmd.Flags().BoolVar(&switchFromDownloaded, "from-downloaded", false, "apply a staged deployment that was previously downloaded with --download-only")
	// The help lists what the node's release has: the daemon reads it.
	defaultHelp := switchCmd.HelpFunc()
	switchCmd.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		v := bootcsim.DefaultVersion
		if s, err := sim(); err == nil {
			if got, err := s.BootcVersion(); err == nil {
				v = got
			}
		}
		for _, f := range []string{"download-only", "from-downloaded"} {
			cmd.Flags().Lookup(f).Hidden = !v.SwitchDownloadOnly()
		}
		defaultHelp(cmd, args)
	})

	var up bootcsim.UpgradeOptions
	var upSoftReboot string
	upgrade := &cobra.Command{
		Use:   "upgrade [--download-only | --from-downloaded] [--apply] [--soft-reboot MODE]",
		Short: "Download and queue an updated container image to apply (bootc upgrade)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return clapUnexpected(cmd, args[0])
			}
			mode, err := parseSoftReboot(upSoftReboot)
			if err != nil {
				return err
			}
			switch {
			case up.DownloadOnly && up.Apply:
				return clapConflict(cmd, "--apply")
			case up.DownloadOnly && up.FromDownloaded:
				return clapConflict(cmd, "--from-downloaded")
			}
			s, err := sim()
			if err != nil {
				return err
			}
			up.SoftReboot = mode
			return s.Upgrade(cmd.Context(), up)
		},
	}
	upgrade.Flags().BoolVar(&up.Apply, "apply", false, "restart or reboot into the new target image")
	upgrade.Flags().StringVar(&upSoftReboot, "soft-reboot", "", "configure soft reboot behavior: required or auto")
	upgrade.Flags().BoolVar(&up.DownloadOnly, "download-only", false, "download and stage the update without applying it")
	upgrade.Flags().BoolVar(&up.FromDownloaded, "from-downloaded", false, "apply a staged deployment that was previously downloaded with --download-only")

	rollback := &cobra.Command{
		Use:   "rollback",
		Short: "Make the rollback deployment the next boot (bootc rollback)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := sim()
			if err != nil {
				return err
			}
			return s.Rollback(cmd.Context())
		},
	}

	simCmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulator commands: install, reboot, health check",
	}
	var initVersion string
	initCmd := &cobra.Command{
		Use:   "init IMAGE",
		Short: "Install IMAGE on a new node directory and boot it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := bootcsim.ParseVersion(initVersion)
			if err != nil {
				return err
			}
			s, err := sim()
			if err != nil {
				return err
			}
			if err := s.Init(cmd.Context(), args[0]); err != nil {
				return err
			}
			return s.SetBootcVersion(v)
		},
	}
	initCmd.Flags().StringVar(&initVersion, "bootc-version", string(bootcsim.DefaultVersion),
		"the bootc release the node runs: "+string(bootcsim.Version116)+" (switch has no --download-only) or "+string(bootcsim.VersionMain))
	simCmd.AddCommand(
		initCmd,
		&cobra.Command{
			Use:   "bootc-version [VERSION]",
			Short: "Print the node's bootc release, or make it VERSION",
			Args:  cobra.MaximumNArgs(1),
			RunE: func(_ *cobra.Command, args []string) error {
				s, err := sim()
				if err != nil {
					return err
				}
				if len(args) == 1 {
					v, err := bootcsim.ParseVersion(args[0])
					if err != nil {
						return err
					}
					return s.SetBootcVersion(v)
				}
				v, err := s.BootcVersion()
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout, v)
				return nil
			},
		},
		&cobra.Command{
			Use:   "crash",
			Short: "Reboot without a shutdown (power loss): no staged deployment is finalized, new boot id",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := sim()
				if err != nil {
					return err
				}
				return s.Crash(cmd.Context())
			},
		},
		&cobra.Command{
			Use:   "soft-reboot",
			Short: "Soft-reboot: userspace restarts into the prepared deployment, same boot id, SoftRebootsCount+1",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := sim()
				if err != nil {
					return err
				}
				return s.SoftReboot(cmd.Context())
			},
		},
		&cobra.Command{
			Use:                "systemctl ARGS...",
			Short:              "The node's systemctl: reboot, soft-reboot, show -p SoftRebootsCount",
			DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				s, err := sim()
				if err != nil {
					return err
				}
				out, err := systemctl(s, args)
				if err != nil {
					return &exitError{code: 1, msg: err.Error()}
				}
				_, err = io.WriteString(stdout, out)
				return err
			},
		},
		&cobra.Command{
			Use:   "reboot",
			Short: "Reboot cleanly: finalize and boot an unlocked staged (or queued rollback) deployment, new boot id",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := sim()
				if err != nil {
					return err
				}
				return s.Reboot(cmd.Context())
			},
		},
		&cobra.Command{
			Use:   "request-reboot",
			Short: "Leave a reboot request for the harness (the node's reboot command)",
			Args:  cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error {
				s, err := sim()
				if err != nil {
					return err
				}
				return s.RequestReboot()
			},
		},
		&cobra.Command{
			Use:   "fail-boot DIGEST",
			Short: "Make images with DIGEST fail their health check after boot",
			Args:  cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error {
				s, err := sim()
				if err != nil {
					return err
				}
				return s.FailBoot(args[0])
			},
		},
		&cobra.Command{
			Use:   "health",
			Short: "Exit 1 when the booted image is marked failing (the node's health check)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := sim()
				if err != nil {
					return err
				}
				if err := s.Health(cmd.Context()); err != nil {
					return &exitError{code: 1, msg: err.Error()}
				}
				fmt.Fprintln(stdout, "healthy")
				return nil
			},
		},
		&cobra.Command{
			Use:   "kargs",
			Short: "Print the booted deployment's kernel arguments",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := sim()
				if err != nil {
					return err
				}
				kargs, err := s.Kargs(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout, strings.Join(kargs, " "))
				return nil
			},
		},
	)
	root.AddCommand(status, switchCmd, upgrade, rollback, simCmd)
	// Options no release has are refused the way bootc's parser does.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if name, ok := strings.CutPrefix(err.Error(), "unknown flag: "); ok {
			return clapUnexpected(cmd, name)
		}
		return &exitError{code: 2, msg: "error: " + err.Error()}
	})
	return root
}

func printStatus(w io.Writer, h *bootc.Host, format string) error {
	switch format {
	case "json":
		data, err := json.Marshal(h)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case "yaml":
		data, err := yaml.Marshal(h)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	case "humanreadable":
		return printHuman(w, h)
	}
	return fmt.Errorf("invalid --format %q: json, yaml or humanreadable", format)
}

func printHuman(w io.Writer, h *bootc.Host) error {
	if h.Status.Booted == nil {
		_, err := fmt.Fprintln(w, "System is not deployed via bootc.")
		return err
	}
	for _, e := range []struct {
		label string
		entry *bootc.BootEntry
	}{{"Staged image", h.Status.Staged}, {"Booted image", h.Status.Booted}, {"Rollback image", h.Status.Rollback}} {
		if e.entry == nil {
			continue
		}
		if e.entry.Image == nil {
			fmt.Fprintf(w, "%s: (not a container image)\n", e.label)
			continue
		}
		img := e.entry.Image
		fmt.Fprintf(w, "%s: %s\n        Digest: %s (%s)\n", e.label, img.Image.Image, img.ImageDigest, img.Architecture)
		if img.Version != "" {
			fmt.Fprintf(w, "       Version: %s\n", img.Version)
		}
		if e.entry.Ostree != nil {
			fmt.Fprintf(w, "    Deployment: %s.%d\n", e.entry.Ostree.Checksum, e.entry.Ostree.DeploySerial)
		}
	}
	if h.Status.RollbackQueued {
		fmt.Fprintln(w, "Rollback queued for the next boot.")
	}
	return nil
}

// sigPolicyHelper is the binary that verifies signatures for a switch
// with --enforce-container-sigpolicy, installed beside bootc-sim.
const sigPolicyHelper = "bootc-sim-sigpolicy"

// helperVerifier verifies signatures by running sigPolicyHelper on the
// node directory root: bootc-sim itself does not link containers/image
// (package sigverify says why).
func helperVerifier(root string) bootcsim.SignatureVerifier {
	return func(ctx context.Context, c bootcsim.PolicyCheck) error {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		helper := filepath.Join(filepath.Dir(self), sigPolicyHelper)
		if _, err := os.Stat(helper); err != nil {
			if helper, err = exec.LookPath(sigPolicyHelper); err != nil {
				return fmt.Errorf("%s is neither beside %s nor on PATH: %w", sigPolicyHelper, self, err)
			}
		}
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, helper, root, c.Image)
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				return errors.New(msg)
			}
			return fmt.Errorf("%s: %w", sigPolicyHelper, err)
		}
		return nil
	}
}
