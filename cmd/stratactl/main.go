// Command stratactl is Strata's command-line tool.
package main

import (
	"fmt"
	"os"
	_ "time/tzdata" // status tells maintenance windows in their IANA zone, on any machine

	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/internal/version"
)

func main() {
	root := &cobra.Command{
		Use:           "stratactl",
		Short:         "Strata's command-line tool",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	version.Apply(root)
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.String("stratactl"))
		},
	})
	root.AddCommand(newRenderCommand())
	root.AddCommand(newStatusCommand())
	root.AddCommand(newLogsCommand())
	root.AddCommand(newApproveCommand())
	root.AddCommand(newRejectCommand())
	root.AddCommand(newInspectCommand())
	root.AddCommand(newBootDiskCommand())
	root.AddCommand(newNodeConfigCommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "stratactl:", err)
		os.Exit(1)
	}
}
