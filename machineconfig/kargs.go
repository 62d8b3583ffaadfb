package machineconfig

import (
	"fmt"
	"strings"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/nodeconfig"
)

// KernelArgumentsTooLongError says that the kernel arguments of the
// MachineConfigs a pool selects, each within the limit alone, do not fit
// the kernel command line together: the rendered image would not boot.
type KernelArgumentsTooLongError struct {
	// Sources are the MachineConfigs that add kernel arguments, in name
	// order, with the bytes of the command line each adds.
	Sources []KernelArgumentsSource
	// Bytes is what all of them take.
	Bytes int
}

// KernelArgumentsSource is one MachineConfig's share of the kernel
// command line.
type KernelArgumentsSource struct {
	Name  string
	Bytes int
}

func (e *KernelArgumentsTooLongError) Error() string {
	parts := make([]string, len(e.Sources))
	for i, s := range e.Sources {
		parts[i] = fmt.Sprintf("%s (%d bytes)", s.Name, s.Bytes)
	}
	return fmt.Sprintf("the kernel arguments (spec.kernelArguments and spec.config.kernelArguments.shouldExist) of MachineConfigs %s take %d bytes of the kernel command line together, more than the %d bytes a rendered config may add: "+
		"the kernel cuts its command line at 2048 bytes and the base image's arguments, ostree= and the bootloader's need the rest; a line cut short does not boot: "+
		"remove kernel arguments or select fewer MachineConfigs",
		strings.Join(parts, ", "), e.Bytes, nodeconfig.MaxKernelArgumentsBytes)
}

// checkKernelCommandLine counts what the rendered config's kernel
// arguments take, as the renderer plans them (every MachineConfig's
// spec.kernelArguments entries kept by the merge, split into arguments,
// then the shouldExist arguments not already there), and gives each
// argument to the first MachineConfig in name order that brings it, so
// that the error can say whose arguments to cut. sorted and cfgs are the
// MachineConfigs and their parsed Ignition configs in name order.
func checkKernelCommandLine(sorted []v1alpha1.MachineConfig, cfgs []igntypes.Config) error {
	bytes := make([]int, len(sorted))
	have := map[string]bool{}
	seenEntry := map[string]bool{}
	total := 0
	for i := range sorted {
		for _, entry := range sorted[i].Spec.KernelArguments {
			if seenEntry[entry] {
				continue
			}
			seenEntry[entry] = true
			args := nodeconfig.SplitKernelArguments(entry)
			for _, a := range args {
				have[a] = true
			}
			bytes[i] += nodeconfig.CommandLineBytes(args)
		}
	}
	for i := range sorted {
		for _, a := range nodeconfig.ShouldExistArguments(&cfgs[i]) {
			if !have[a] {
				have[a] = true
				bytes[i] += nodeconfig.CommandLineBytes([]string{a})
			}
		}
	}
	var sources []KernelArgumentsSource
	for i, n := range bytes {
		total += n
		if n > 0 {
			sources = append(sources, KernelArgumentsSource{Name: sorted[i].Name, Bytes: n})
		}
	}
	if total <= nodeconfig.MaxKernelArgumentsBytes {
		return nil
	}
	return &KernelArgumentsTooLongError{Sources: sources, Bytes: total}
}
