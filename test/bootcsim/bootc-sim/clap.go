package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/rollout/bootc"
)

// bootc parses its command line with clap, which refuses what it does
// not know with exit status 2 and a message of its own shape. The daemon
// and its tests may read either, so the simulator answers the same way.

// clapUsage is the usage line clap prints for cmd.
func clapUsage(cmd *cobra.Command) string {
	if cmd.Name() == "switch" {
		return "Usage: bootc switch [OPTIONS] <TARGET>"
	}
	return "Usage: bootc " + cmd.Name() + " [OPTIONS]"
}

// clapUnexpected is clap's refusal of an unknown argument.
func clapUnexpected(cmd *cobra.Command, arg string) error {
	return &exitError{code: 2, msg: fmt.Sprintf("error: unexpected argument '%s' found\n\n  tip: to pass '%s' as a value, use '-- %s'\n\n%s\n\nFor more information, try '--help'.",
		arg, arg, arg, clapUsage(cmd))}
}

// clapConflict is clap's refusal of --download-only with an option it
// excludes.
func clapConflict(cmd *cobra.Command, other string) error {
	return &exitError{code: 2, msg: fmt.Sprintf("error: the argument '--download-only' cannot be used with '%s'\n\n%s\n\nFor more information, try '--help'.", other, clapUsage(cmd))}
}

// clapMissingTarget is clap's refusal of a switch without exactly one
// target.
func clapMissingTarget(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return clapUnexpected(cmd, args[1])
	}
	return &exitError{code: 2, msg: "error: the following required arguments were not provided:\n  <TARGET>\n\n" + clapUsage(cmd) + "\n\nFor more information, try '--help'."}
}

// parseSoftReboot reads a --soft-reboot value as clap's value enum does.
func parseSoftReboot(s string) (bootc.SoftRebootMode, error) {
	switch m := bootc.SoftRebootMode(s); m {
	case bootc.SoftRebootNone, bootc.SoftRebootAuto, bootc.SoftRebootRequired:
		return m, nil
	}
	return "", &exitError{code: 2, msg: fmt.Sprintf("error: invalid value '%s' for '--soft-reboot <SOFT_REBOOT>'\n  [possible values: required, auto]\n\nFor more information, try '--help'.", s)}
}

// systemctl is the simulated node's systemctl for what Strata asks of
// it: reboot and soft-reboot leave a request for the harness, show reads
// SoftRebootsCount. Anything else is refused: it is not simulated.
func systemctl(s interface {
	RequestReboot() error
	RequestSoftReboot() error
	SoftReboots() (int, error)
}, args []string) (string, error) {
	if len(args) == 1 && args[0] == "reboot" {
		return "", s.RequestReboot()
	}
	if len(args) == 1 && args[0] == "soft-reboot" {
		return "", s.RequestSoftReboot()
	}
	if len(args) > 0 && args[0] == "show" {
		var props []string
		value := false
		for i := 1; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "--value":
				value = true
			case (a == "-p" || a == "-P" || a == "--property") && i+1 < len(args):
				value = value || a == "-P"
				props = append(props, args[i+1])
				i++
			case strings.HasPrefix(a, "--property="):
				props = append(props, strings.TrimPrefix(a, "--property="))
			default:
				return "", fmt.Errorf("simulated systemctl: show %s is not simulated", a)
			}
		}
		if len(props) != 1 || props[0] != "SoftRebootsCount" {
			return "", fmt.Errorf("simulated systemctl: show %s is not simulated (only SoftRebootsCount)", strings.Join(props, ","))
		}
		n, err := s.SoftReboots()
		if err != nil {
			return "", err
		}
		if value {
			return fmt.Sprintf("%d\n", n), nil
		}
		return fmt.Sprintf("SoftRebootsCount=%d\n", n), nil
	}
	return "", fmt.Errorf("simulated systemctl: %s is not simulated", strings.Join(args, " "))
}
