// Command strata-controller is the controller manager: it renders pools'
// configurations, builds layered pools' images and rolls them out.
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
		Use:           "strata-controller",
		Short:         "Strata's controller manager: renders, builds and rolls out node OS images",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("no controller is implemented yet")
		},
	}
	version.Apply(cmd)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata-controller:", err)
		os.Exit(1)
	}
}
