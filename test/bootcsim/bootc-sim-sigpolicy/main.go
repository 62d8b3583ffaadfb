// Command bootc-sim-sigpolicy verifies an image's signatures against a
// simulated node's containers policy, for bootc-sim's switch with
// --enforce-container-sigpolicy:
//
//	bootc-sim-sigpolicy NODE-ROOT IMAGE
//
// It exits 0 when the image passes, and otherwise prints why and exits 1.
// It is a binary of its own so that bootc-sim, run at every step of every
// simulated node's update, does not link containers/image.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/bootcsim/sigverify"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: bootc-sim-sigpolicy NODE-ROOT IMAGE")
		os.Exit(2)
	}
	if err := verify(context.Background(), os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func verify(ctx context.Context, root, image string) error {
	s, err := bootcsim.New(root)
	if err != nil {
		return err
	}
	c, err := s.PolicyCheck(image)
	if err != nil {
		return err
	}
	return sigverify.Verify(ctx, c)
}
