// Package version carries the build's version, set at link time by the
// Makefile, so every Strata binary reports the same one.
package version

import (
	"fmt"
	"runtime"
)

// Version is set with -ldflags "-X github.com/strata-dev/strata/internal/version.Version=...".
var Version = "v0.0.0-dev"

// String is the version line the binaries print for --version.
func String(binary string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", binary, Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
