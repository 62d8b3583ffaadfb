// Command bootc is the bootc of the real-boot tier's virtual machines
// (issue 22): status, switch and rollback as bootc does them, on the
// booted Debian 12 ostree system it runs in. See package vmbootc. Build
// it static (CGO_ENABLED=0): the guest has ostree and coreutils, no Go.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/strata-dev/strata/test/vmbootc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := vmbootc.Main(ctx, vmbootc.Guest(), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
