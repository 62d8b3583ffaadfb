//go:build vm

package vm_test

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-dev/strata/test/vm"
)

// registryPort is the test registry's, 127.0.0.1:5000 (hack/cluster).
const registryPort = 5000

// probe runs in the guest at multi-user (the marker's probe): it asks the
// registry for /v2/ at the address the host uses, which only the relays
// make reachable, and tries the user network's gateway, which an
// unrestricted user network would map to the host's loopback.
const probe = `#!/bin/bash
for i in $(seq 60); do
	if exec 3<>/dev/tcp/127.0.0.1/5000; then
		printf 'GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1:5000\r\n\r\n' >&3
		line=$(head -1 <&3 | tr -d '\r')
		exec 3<&-
		[ -n "$line" ] && { echo "registry: $line"; break; }
	fi
	sleep 1
done 2>/dev/null
if timeout 5 bash -c 'exec 3<>/dev/tcp/10.0.2.2/5000' 2>/dev/null; then echo "gateway: reachable"; else echo "gateway: unreachable"; fi
`

// TestBootBase boots the base image's disk to multi-user: the smoke test
// of the base, the bootloader and the harness, and of the guest's
// network, which reaches the host's registry at 127.0.0.1:5000 through
// the relays and nothing else.
func TestBootBase(t *testing.T) {
	disk, base := vm.Disk(t, vm.BaseImage())
	// The registry the base came from (the test cluster's, unless
	// STRATA_VM_BASE names another) is the guest's 127.0.0.1:5000.
	h, p, err := net.SplitHostPort(strings.SplitN(base, "/", 2)[0])
	host, perr := strconv.Atoi(p)
	if err != nil || perr != nil || h != "127.0.0.1" {
		t.Fatalf("the base %s is not in a registry on 127.0.0.1", base)
	}
	start := time.Now()
	v := vm.Start(t, vm.Config{
		Disk:        disk,
		Ports:       map[int]int{registryPort: host},
		ConfigDrive: []vm.File{{Name: "probe", Data: []byte(probe), Mode: 0o755}},
	})
	m := v.WaitMarker(t, "multi-user", 5*time.Minute)
	t.Logf("multi-user in %s: %+v", time.Since(start).Round(time.Second), m)
	if m.BootID == "" || !strings.Contains(m.Deployment, ".") {
		t.Errorf("marker without a boot id or a booted deployment: %+v", m)
	}
	if !slices.ContainsFunc(m.Probe, func(l string) bool {
		return strings.HasPrefix(l, "registry: HTTP/1.") && strings.HasSuffix(l, " 200 OK")
	}) {
		t.Errorf("the guest did not reach the registry at 127.0.0.1:%s: %q", strconv.Itoa(registryPort), m.Probe)
	}
	if want := "gateway: unreachable"; !slices.Contains(m.Probe, want) {
		t.Errorf("the guest reached the host through the user network's gateway (want %q): %q", want, m.Probe)
	}
}
