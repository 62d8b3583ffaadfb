package rollout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/strata-dev/strata/rollout/bootc"
)

// Bootc is what the daemon asks of bootc; *bootc.Command implements it.
type Bootc interface {
	// Status is `bootc status --format=json`.
	Status(ctx context.Context) (*bootc.Host, error)
	// Switch stages image for the next boot without rebooting.
	Switch(ctx context.Context, image string) error
	// Rollback makes the rollback deployment the next boot.
	Rollback(ctx context.Context) error
}

// Machine is the rest of the host the daemon uses.
type Machine interface {
	// BootID identifies the running boot; it changes at every boot.
	BootID() (string, error)
	// Reboot asks the host to reboot. It may return before the reboot
	// happens; the daemon takes no further step after it.
	Reboot(ctx context.Context) error
	// CheckHealth runs the node's health check; the error says why the
	// node is unhealthy (the check's output).
	CheckHealth(ctx context.Context) error
}

// healthOutput is how much of a failed health check's output a reason
// carries.
const healthOutput = 512

// Commands is the Machine of a real node: a boot id file and two
// commands.
type Commands struct {
	// BootIDFile is /proc/sys/kernel/random/boot_id on a real node.
	BootIDFile string
	// RebootArgv is the reboot command.
	RebootArgv []string
	// HealthArgv is the health check command; empty means none (only
	// the Node's Ready condition counts).
	HealthArgv []string
	// HealthTimeout bounds one run of the health check; 0 means one
	// minute.
	HealthTimeout time.Duration
}

var _ Machine = (*Commands)(nil)

// BootID reads the boot id file.
func (c *Commands) BootID() (string, error) {
	b, err := os.ReadFile(c.BootIDFile)
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("read boot id: %s is empty", c.BootIDFile)
	}
	return id, nil
}

// Reboot runs the reboot command.
func (c *Commands) Reboot(ctx context.Context) error {
	if len(c.RebootArgv) == 0 {
		return errors.New("no reboot command")
	}
	out, err := exec.CommandContext(ctx, c.RebootArgv[0], c.RebootArgv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("reboot command %s: %w: %s", c.RebootArgv[0], err, bootc.Tail(string(out), healthOutput))
	}
	return nil
}

// CheckHealth runs the health check command, if there is one.
func (c *Commands) CheckHealth(ctx context.Context) error {
	if len(c.HealthArgv) == 0 {
		return nil
	}
	timeout := c.HealthTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, c.HealthArgv[0], c.HealthArgv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if msg := bootc.Tail(out.String(), healthOutput); msg != "" {
		return fmt.Errorf("health check %s: %s", c.HealthArgv[0], msg)
	}
	return fmt.Errorf("health check %s: %w", c.HealthArgv[0], err)
}

// SoftRebooter soft-reboots the node into its staged deployment and
// counts its soft reboots; BootcSoftReboot implements it.
type SoftRebooter interface {
	// SoftReboot applies the staged deployment with a soft reboot
	// (bootc upgrade --from-downloaded --apply --soft-reboot=required);
	// it fails, rebooting nothing, when the deployment is not capable.
	SoftReboot(ctx context.Context) error
	bootc.SoftRebootCounter
}

// BootcSoftReboot is the SoftRebooter of a real node: bootc and
// systemctl.
type BootcSoftReboot struct {
	Bootc     *bootc.Command
	Systemctl *bootc.Systemctl
}

var _ SoftRebooter = (*BootcSoftReboot)(nil)

// SoftReboot runs `bootc upgrade --from-downloaded --apply
// --soft-reboot=required`: a plain switch of the staged image again
// would find its specification unchanged and do nothing, while
// --from-downloaded applies the staged deployment whatever staged it.
func (b *BootcSoftReboot) SoftReboot(ctx context.Context) error {
	return b.Bootc.ApplyDownloaded(ctx, bootc.Apply{Reboot: true, SoftReboot: bootc.SoftRebootRequired})
}

// SoftRebootCount is systemd's SoftRebootsCount.
func (b *BootcSoftReboot) SoftRebootCount(ctx context.Context) (int, error) {
	return b.Systemctl.SoftRebootCount(ctx)
}

// StagingLock stages a deployment that no reboot applies until the
// daemon unlocks it (bootc's download-only staging, BOOTC.md "Locked
// staging"); *bootc.Command implements it.
type StagingLock interface {
	// Capabilities says which of the options this bootc has.
	Capabilities(ctx context.Context) (bootc.Capabilities, error)
	// SwitchWith is `bootc switch` with options (--download-only).
	SwitchWith(ctx context.Context, image string, o bootc.SwitchOptions) error
	// LockStaged is `bootc upgrade --download-only`: it locks the staged
	// deployment.
	LockStaged(ctx context.Context) error
	// ApplyDownloaded is `bootc upgrade --from-downloaded`: it unlocks
	// the staged deployment (and with Apply reboots into it).
	ApplyDownloaded(ctx context.Context, a bootc.Apply) error
}

var _ StagingLock = (*bootc.Command)(nil)
