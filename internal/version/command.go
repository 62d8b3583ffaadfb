package version

import "github.com/spf13/cobra"

// Apply gives a root command the --version flag every Strata binary shares.
func Apply(cmd *cobra.Command) {
	cmd.Version = Version
	cmd.SetVersionTemplate(String(cmd.Name()) + "\n")
}
