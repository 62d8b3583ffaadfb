package bootc

import (
	"context"
	"fmt"
	"regexp"
)

// SoftRebootMode is bootc's --soft-reboot value. A soft reboot restarts
// userspace into the new deployment and keeps the kernel, so the boot id
// stays; bootc can do one only when the kernel, initramfs, kernel
// arguments and SELinux policy are unchanged (softRebootCapable).
type SoftRebootMode string

const (
	// SoftRebootNone leaves --soft-reboot out: a reboot is a full one.
	SoftRebootNone SoftRebootMode = ""
	// SoftRebootAuto soft-reboots when the deployment is capable and
	// reboots fully otherwise.
	SoftRebootAuto SoftRebootMode = "auto"
	// SoftRebootRequired fails when the deployment is not capable: the
	// deployment is staged (or unlocked) by then, and nothing reboots.
	SoftRebootRequired SoftRebootMode = "required"
)

// Apply says whether bootc reboots into the staged deployment at once.
type Apply struct {
	// Reboot is --apply: bootc reboots (or soft-reboots) right away.
	Reboot bool
	// SoftReboot is --soft-reboot. Without Reboot bootc only prepares
	// the soft reboot (required still fails when it cannot).
	SoftReboot SoftRebootMode
}

func (a Apply) validate() error {
	switch a.SoftReboot {
	case SoftRebootNone, SoftRebootAuto, SoftRebootRequired:
		return nil
	}
	return fmt.Errorf("bootc: soft reboot mode %q: want %q or %q", a.SoftReboot, SoftRebootAuto, SoftRebootRequired)
}

func (a Apply) args() []string {
	var args []string
	if a.Reboot {
		args = append(args, "--apply")
	}
	if a.SoftReboot != SoftRebootNone {
		args = append(args, "--soft-reboot="+string(a.SoftReboot))
	}
	return args
}

// SwitchOptions are the options of `bootc switch` beyond the image.
type SwitchOptions struct {
	// DownloadOnly is --download-only: the staged deployment is locked,
	// no reboot applies it until ApplyDownloaded. Only bootc releases
	// after 1.16 have it (Capabilities.SwitchDownloadOnly).
	DownloadOnly bool
	// Apply reboots into the new deployment at once.
	Apply Apply
	// EnforceSigPolicy is --enforce-container-sigpolicy: bootc fetches
	// through the host's /etc/containers/policy.json and refuses an image
	// the policy refuses (and a policy whose default accepts anything).
	EnforceSigPolicy bool
}

func (o SwitchOptions) validate() error {
	if o.DownloadOnly && (o.Apply.Reboot || o.Apply.SoftReboot != SoftRebootNone) {
		return fmt.Errorf("bootc: switch --download-only stages a deployment no reboot applies; it takes no --apply or --soft-reboot")
	}
	return o.Apply.validate()
}

// Capabilities are the options this host's bootc has, read from its
// help. The help is what bootc's argument parser (clap) is built from,
// so it says exactly what a call will accept, also on a distribution
// build that carries back-ported options under an older version number;
// comparing version numbers would not.
type Capabilities struct {
	// SwitchDownloadOnly: `bootc switch` has --download-only and
	// --from-downloaded (merged upstream 2026-07, PR 2342; not in 1.16).
	SwitchDownloadOnly bool
	// UpgradeDownloadOnly: `bootc upgrade` has --download-only and
	// --from-downloaded (bootc 1.12 on).
	UpgradeDownloadOnly bool
	// SoftReboot: switch and upgrade have --soft-reboot.
	SoftReboot bool
	// EnforceSigPolicy: switch has --enforce-container-sigpolicy.
	EnforceSigPolicy bool
}

// LockedStaging says whether the daemon can stage without an unlocked
// window: only when switch itself downloads locked.
func (c Capabilities) LockedStaging() bool { return c.SwitchDownloadOnly }

// Capabilities runs `bootc switch --help` and `bootc upgrade --help` and
// reads which options they list.
func (c *Command) Capabilities(ctx context.Context) (Capabilities, error) {
	timeout := pick(c.Timeouts.Status, DefaultTimeouts.Status)
	sw, err := c.run(ctx, timeout, "switch", "--help")
	if err != nil {
		return Capabilities{}, err
	}
	up, err := c.run(ctx, timeout, "upgrade", "--help")
	if err != nil {
		return Capabilities{}, err
	}
	return ParseCapabilities(string(sw), string(up)), nil
}

// ParseCapabilities reads the options from the help texts of switch and
// upgrade.
func ParseCapabilities(switchHelp, upgradeHelp string) Capabilities {
	return Capabilities{
		SwitchDownloadOnly:  hasOption(switchHelp, "download-only") && hasOption(switchHelp, "from-downloaded"),
		UpgradeDownloadOnly: hasOption(upgradeHelp, "download-only") && hasOption(upgradeHelp, "from-downloaded"),
		SoftReboot:          hasOption(switchHelp, "soft-reboot") && hasOption(upgradeHelp, "soft-reboot"),
		EnforceSigPolicy:    hasOption(switchHelp, "enforce-container-sigpolicy"),
	}
}

// hasOption says whether help lists --name as an option: on a line of
// its own, after the indentation and maybe a short form ("-q, "), never
// within a description, which can name another option ("downloaded with
// --download-only").
func hasOption(help, name string) bool {
	re := regexp.MustCompile(`(?m)^[ \t]*(?:-[A-Za-z0-9], )?--` + regexp.QuoteMeta(name) + `(?:[ \t=<\[]|$)`)
	return re.MatchString(help)
}
