package vmbootc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/rollout/bootc"
)

// usageError is a command line bootc's parser (clap) refuses: exit
// status 2 and clap's message.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// Main runs the bootc command line args on sys and returns the exit
// status: 0, 1 for a failed command (stderr "error: ..." as bootc
// prints it), 2 for a command line bootc would refuse.
func Main(ctx context.Context, sys *System, args []string, stdout, stderr io.Writer) int {
	sys.Out = stdout
	cmd := newCommand(sys, stdout)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, ue.msg)
			return 2
		}
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

// clapUsage is clap's refusal of a command line, in its shape.
func clapUsage(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "unknown flag: "); ok {
		msg = fmt.Sprintf("unexpected argument '%s' found", f)
	} else if f, ok := strings.CutPrefix(msg, "unknown shorthand flag: "); ok {
		msg = fmt.Sprintf("unexpected argument %s", f)
	}
	return &usageError{msg: fmt.Sprintf("error: %s\n\nUsage: bootc %s\n\nFor more information, try '--help'.",
		msg, strings.TrimPrefix(cmd.UseLine(), "bootc "))}
}

func newCommand(sys *System, stdout io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "bootc",
		Short: "bootc for the real-boot tier: status, switch and rollback on Debian 12's ostree",
		Long: `This bootc does what bootc 1.16 does for status, switch and rollback,
with Debian 12's ostree (2022.7): images are pulled from a registry,
committed into the sysroot's repository and staged with
ostree admin deploy --stage. It lists only the options it implements.`,
		SilenceUsage:          true,
		SilenceErrors:         true,
		CompletionOptions:     cobra.CompletionOptions{DisableDefaultCmd: true},
		DisableFlagsInUseLine: true,
	}
	root.SetFlagErrorFunc(clapUsage)

	var format string
	var jsonAlias, bootedOnly bool
	status := &cobra.Command{
		Use:   "status [OPTIONS]",
		Short: "Display the status of the host",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := sys.Status(cmd.Context())
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
	status.Flags().StringVar(&format, "format", "yaml", "the output format: json or yaml")
	status.Flags().BoolVar(&jsonAlias, "json", false, "output JSON (alias of --format=json)")
	_ = status.Flags().MarkHidden("json")
	status.Flags().BoolVar(&bootedOnly, "booted", false, "only display the booted deployment")

	var opts SwitchOptions
	var retain bool
	switchCmd := &cobra.Command{
		Use:   "switch [OPTIONS] [TARGET]",
		Short: "Target a new container image reference to boot",
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.DownloadOnly && opts.FromDownloaded {
				return conflict(cmd, "download-only", "from-downloaded")
			}
			if len(args) > 1 {
				return clapUsage(cmd, fmt.Errorf("unknown flag: %s", args[1]))
			}
			if len(args) == 0 {
				if !opts.FromDownloaded {
					return &usageError{msg: "error: the following required arguments were not provided:\n  <TARGET>\n\nUsage: bootc switch [OPTIONS] [TARGET]\n\nFor more information, try '--help'."}
				}
				return sys.ApplyDownloaded(cmd.Context())
			}
			_, err := sys.Switch(cmd.Context(), args[0], opts)
			return err
		},
	}
	switchCmd.Flags().StringVar(&opts.Transport, "transport", bootc.TransportRegistry, "the transport; only registry")
	// The help of these two is bootc's own: the daemon reads it.
	switchCmd.Flags().BoolVar(&opts.DownloadOnly, "download-only", false, "Download and stage the image without applying it.")
	switchCmd.Flags().BoolVar(&opts.FromDownloaded, "from-downloaded", false, "Apply a staged deployment that was previously downloaded with --download-only.")
	switchCmd.Flags().BoolVar(&retain, "retain", false, "retain reference to currently booted image (accepted; one rollback is kept)")

	rollback := &cobra.Command{
		Use:   "rollback [OPTIONS]",
		Short: "Change the bootloader entry ordering; the deployment under rollback will be queued for the next boot",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sys.Rollback(cmd.Context())
		},
	}

	// upgrade only locks and unlocks: this bootc switches by digest, so
	// the spec's image is already staged or booted (downloadonly.go).
	var upOpts UpgradeOptions
	upgrade := &cobra.Command{
		Use:   "upgrade [OPTIONS]",
		Short: "Lock or unlock the staged deployment (--download-only, --from-downloaded); nothing else is implemented",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if upOpts.DownloadOnly && upOpts.FromDownloaded {
				return conflict(cmd, "download-only", "from-downloaded")
			}
			return sys.Upgrade(cmd.Context(), upOpts)
		},
	}
	upgrade.Flags().BoolVar(&upOpts.DownloadOnly, "download-only", false, "Download and stage the update without applying it.")
	upgrade.Flags().BoolVar(&upOpts.FromDownloaded, "from-downloaded", false, "Apply a staged deployment that was previously downloaded with --download-only.")

	for _, c := range []*cobra.Command{status, switchCmd, rollback, upgrade} {
		c.SetFlagErrorFunc(clapUsage)
		c.DisableFlagsInUseLine = true
		root.AddCommand(c)
	}
	return root
}

// conflict is clap's refusal of two options that exclude each other.
func conflict(cmd *cobra.Command, a, b string) error {
	return &usageError{msg: fmt.Sprintf("error: the argument '--%s' cannot be used with '--%s'\n\nUsage: %s\n\nFor more information, try '--help'.",
		a, b, cmd.UseLine())}
}

// noArgs refuses positional arguments as clap does.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return clapUsage(cmd, fmt.Errorf("unknown flag: %s", args[0]))
	}
	return nil
}

func printStatus(w io.Writer, h *bootc.Host, format string) error {
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	switch format {
	case "json":
	case "yaml", "humanreadable":
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	default:
		return &usageError{msg: fmt.Sprintf("error: invalid value '%s' for '--format <FORMAT>'\n  [possible values: humanreadable, yaml, json]\n\nFor more information, try '--help'.", format)}
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	if format == "json" {
		_, err = io.WriteString(w, "\n")
	}
	return err
}
