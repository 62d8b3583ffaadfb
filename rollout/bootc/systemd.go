package bootc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A soft reboot keeps the kernel, so the boot id the daemon compares
// across a reboot does not change. systemd counts soft reboots since the
// kernel booted (SoftRebootsCount, systemd 254 on); the count going up is
// how the daemon sees a soft reboot happen.

// SoftRebootCounter reads systemd's count of soft reboots of this boot.
type SoftRebootCounter interface {
	SoftRebootCount(ctx context.Context) (int, error)
}

// ErrNoSoftRebootCount is returned by a systemd that does not know the
// property: older than 254, it cannot soft-reboot at all.
var ErrNoSoftRebootCount = errors.New("systemd reports no SoftRebootsCount (older than 254: no soft reboot)")

// Systemctl runs systemctl as Argv, e.g. ["nsenter", "--target", "1",
// "--mount", "--pid", "--", "systemctl"] from a pod, the way the reboot
// command reaches the host's systemd.
type Systemctl struct {
	Argv []string
	// Timeout bounds one call; 0 means Timeouts' Status default.
	Timeout time.Duration
}

var _ SoftRebootCounter = (*Systemctl)(nil)

// NewSystemctl splits a command line at white space into a Systemctl.
func NewSystemctl(line string) (*Systemctl, error) {
	argv := strings.Fields(line)
	if len(argv) == 0 {
		return nil, errors.New("empty systemctl command")
	}
	return &Systemctl{Argv: argv}, nil
}

// SoftRebootCount runs `systemctl show -p SoftRebootsCount`.
func (s *Systemctl) SoftRebootCount(ctx context.Context) (int, error) {
	out, err := run(ctx, "systemctl", s.Argv, pick(s.Timeout, DefaultTimeouts.Status), "show", "-p", "SoftRebootsCount")
	if err != nil {
		return 0, err
	}
	return ParseSoftRebootsCount(string(out))
}

// ParseSoftRebootsCount reads `systemctl show -p SoftRebootsCount`
// output: "SoftRebootsCount=N". systemd prints nothing for a property it
// does not have.
func ParseSoftRebootsCount(out string) (int, error) {
	out = strings.TrimSpace(out)
	if out == "" {
		return 0, ErrNoSoftRebootCount
	}
	v, ok := strings.CutPrefix(out, "SoftRebootsCount=")
	if !ok || strings.ContainsAny(v, "\n=") {
		return 0, fmt.Errorf("systemctl show -p SoftRebootsCount: unexpected output %q", Tail(out, 80))
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("systemctl show -p SoftRebootsCount: count %q is not a number", v)
	}
	return n, nil
}
