// Command strata-daemon is the node agent: it drains its node, switches it
// to the desired image with bootc, reboots, verifies and uncordons.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/internal/version"
)

func main() {
	cmd := &cobra.Command{
		Use:           "strata-daemon",
		Short:         "Strata's node agent: applies the desired OS image to its node with bootc",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the node rollout is not implemented yet")
		},
	}
	version.Apply(cmd)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata-daemon:", err)
		os.Exit(1)
	}
}
