// Command bootc-sim is a bootc stand-in for tests: it answers the bootc
// commands the Strata daemon runs (status, switch, rollback) for one
// simulated node directory, plus "sim" commands that stand in for the
// install, the reboot and the health check. See package bootcsim.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
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
	switchCmd := &cobra.Command{
		Use:   "switch [--transport registry] [--retain] IMAGE",
		Short: "Target a new container image reference to boot (bootc switch)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := sim()
			if err != nil {
				return err
			}
			_, err = s.Switch(cmd.Context(), args[0], opts)
			return err
		},
	}
	switchCmd.Flags().StringVar(&opts.Transport, "transport", bootc.TransportRegistry, "the image transport; only registry")
	switchCmd.Flags().BoolVar(&opts.Retain, "retain", false, "retain the booted image's reference (accepted; the simulator keeps it anyway)")

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
	simCmd.AddCommand(
		&cobra.Command{
			Use:   "init IMAGE",
			Short: "Install IMAGE on a new node directory and boot it",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				s, err := sim()
				if err != nil {
					return err
				}
				return s.Init(cmd.Context(), args[0])
			},
		},
		&cobra.Command{
			Use:   "reboot",
			Short: "Reboot: finalize and boot the staged (or queued rollback) deployment, new boot id",
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
	root.AddCommand(status, switchCmd, rollback, simCmd)
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
