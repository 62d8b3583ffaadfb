//go:build vm

package vm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/strata-dev/strata/test/vm"
)

// TestBootBase boots the base image's disk to multi-user, and again after
// a reset: the smoke test of the base, the bootloader and the harness.
func TestBootBase(t *testing.T) {
	disk, _ := vm.Disk(t, vm.BaseImage())
	start := time.Now()
	v := vm.Start(t, vm.Config{Disk: disk})
	m := v.WaitMarker(t, "multi-user", 5*time.Minute)
	t.Logf("multi-user in %s: %+v", time.Since(start).Round(time.Second), m)
	if m.BootID == "" || !strings.Contains(m.Deployment, ".") {
		t.Fatalf("marker without a boot id or a booted deployment: %+v", m)
	}
}
