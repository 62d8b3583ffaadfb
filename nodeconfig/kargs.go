package nodeconfig

import (
	"fmt"
	"strings"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxKernelArgumentsBytes bounds the kernel arguments of one config (a
// MachineConfig's, or a pool's rendered one), counted as they sit on the
// kernel command line: each argument and the space before it. The kernel
// keeps COMMAND_LINE_SIZE bytes of its command line, the terminating NUL
// included, and silently drops the rest: 2048 on x86_64, aarch64 and
// ppc64le (4096 on s390x). bootc appends the image's kargs.d arguments to
// the base image's own and to what the bootloader entry carries (root=,
// ostree=/ostree/boot.N/<os>/<64 hex digits>/0, BOOT_IMAGE= with the
// same path, console=, the platform id), and a command line cut short
// loses ostree= with them: the node does not boot, and no daemon is left
// to roll it back. The base's arguments are in its image, which the
// renderer does not read, so half the line is left for them (a Fedora
// CoreOS or CentOS bootc line is 300 to 500 bytes).
const MaxKernelArgumentsBytes = 1024

// refusedKernelArguments are arguments that boot a node into something
// other than its normal system, where neither the kubelet nor the daemon
// runs, so that the node cannot report or roll back: a replacement init,
// a shell in the initramfs, another systemd target, or the runlevel words
// systemd reads as rescue or emergency (its runlevel table: "emergency"
// and "-b" for emergency.target; "rescue", "single", "s", "S", "-s" and
// "1" for rescue.target). ostree= is the bootloader entry's, naming the
// deployment to boot; a second one would boot another deployment, or
// none. "--" passes what follows it to init instead of the kernel.
// Arguments that only act when a boot already fails (rd.shell,
// rd.emergency=, systemd.crash_shell) and the runlevels 2 to 5
// (multi-user and graphical) are accepted. Keys compare as the kernel
// reads them: without double quotes, up to '='.
var refusedKernelArguments = map[string]string{
	"init":            "replaces systemd as the first process" + noDaemon,
	"rdinit":          "replaces the initramfs's init" + noDaemon,
	"rd.break":        "stops the boot in a shell in the initramfs" + noDaemon,
	"systemd.unit":    "boots another systemd target than the image's default" + noDaemon + "; set the default target in the image instead",
	"rd.systemd.unit": "boots the initramfs into another systemd target" + noDaemon,
	"emergency":       "boots into emergency.target" + noDaemon,
	"-b":              "boots into emergency.target" + noDaemon,
	"rescue":          "boots into rescue.target" + noDaemon,
	"single":          "boots into rescue.target" + noDaemon,
	"s":               "boots into rescue.target" + noDaemon,
	"S":               "boots into rescue.target" + noDaemon,
	"-s":              "boots into rescue.target" + noDaemon,
	"1":               "boots into rescue.target" + noDaemon,
	"ostree":          "is the bootloader entry's own, naming the deployment to boot: another one boots another deployment, or none",
	"--":              "passes the arguments after it to init instead of the kernel",
}

const noDaemon = ", where neither the kubelet nor the Strata daemon runs to report or roll back the node"

// kernelArgumentKey is the name of an argument as the kernel's
// parse_args() reads it: double quotes removed, up to '='.
func kernelArgumentKey(a string) string {
	key, _, _ := strings.Cut(strings.ReplaceAll(a, `"`, ""), "=")
	return key
}

// refusedArg says why a kernel argument would take a node out of a normal
// boot, or "" when it does not.
func refusedArg(a string) string {
	key := kernelArgumentKey(a)
	why, ok := refusedKernelArguments[key]
	if !ok {
		return ""
	}
	return "must not take the node out of a normal boot: " + key + " " + why
}

// CommandLineBytes is how much of the kernel command line args take when
// they are appended to it: each one and the space before it.
func CommandLineBytes(args []string) int {
	n := 0
	for _, a := range args {
		n += len(a) + 1
	}
	return n
}

// SplitKernelArguments splits one spec.kernelArguments entry into the
// arguments it holds, as the renderer does (at spaces outside double
// quotes).
func SplitKernelArguments(entry string) []string {
	return splitKernelArguments(entry)
}

// ShouldExistArguments are the arguments of an Ignition config's
// kernelArguments.shouldExist, in order.
func ShouldExistArguments(cfg *ign.Config) []string {
	out := make([]string, len(cfg.KernelArguments.ShouldExist))
	for i, a := range cfg.KernelArguments.ShouldExist {
		out[i] = string(a)
	}
	return out
}

// commandLineTooLong is the refusal of the argument at fldPath, which
// takes a config's kernel arguments past MaxKernelArgumentsBytes; total
// is what all of them take.
func commandLineTooLong(fldPath *field.Path, total int) *field.Error {
	return &field.Error{
		Type:     field.ErrorTypeTooLong,
		Field:    fldPath.String(),
		BadValue: field.OmitValueType{},
		Detail: fmt.Sprintf("the config's kernel arguments pass the limit here: they take %d bytes of the kernel command line, more than the %d bytes a config may add; "+
			"the kernel cuts its command line at 2048 bytes and the base image's arguments, ostree= and the bootloader's need the rest; "+
			"a line cut short does not boot", total, MaxKernelArgumentsBytes),
	}
}

// checkCommandLine refuses kernel arguments that do not fit
// MaxKernelArgumentsBytes, naming the first whose field (origins[i] for
// args[i]) passes it.
func checkCommandLine(args []string, origins []*field.Path) *field.Error {
	total := 0
	for i, a := range args {
		total += len(a) + 1
		if total > MaxKernelArgumentsBytes {
			return commandLineTooLong(origins[i], CommandLineBytes(args))
		}
	}
	return nil
}
