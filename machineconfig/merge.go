package machineconfig

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/nodeconfig"
)

// IgnitionVersion is the Ignition spec version of every rendered config:
// older 3.x configs are translated up to it before they are merged.
const IgnitionVersion = "3.5.0"

// Merge merges configs in name order, whatever order they are given in:
//   - Ignition configs with Ignition's own merge semantics, so a later
//     config wins per file path, unit name and drop-in name;
//   - kernel arguments concatenated in order, exact duplicates dropped
//     (the first occurrence keeps its place);
//   - extensions as a sorted set;
//   - kernelType: a non-default kernel (realtime, 64k-pages) in any config
//     wins over default, whatever the order, and the last of them wins over
//     the others; default only when no config asks for another kernel;
//   - osImageURL: the last non-empty value wins.
//
// The result's Ignition config is canonical JSON at IgnitionVersion, so equal
// content gives equal bytes (and an equal Hash). A result that could not be
// stored as a MachineConfig (see MaxRenderedSize) is a *TooLargeError; one
// whose kernel arguments would not fit the kernel command line (see
// nodeconfig.MaxKernelArgumentsBytes) is a *KernelArgumentsTooLongError.
func Merge(configs []v1alpha1.MachineConfig) (v1alpha1.MachineConfigSpec, error) {
	spec, _, err := MergeIgnition(configs)
	return spec, err
}

// MergeIgnition is Merge that also returns the merged Ignition config, so
// that callers can check it without parsing the JSON again.
func MergeIgnition(configs []v1alpha1.MachineConfig) (v1alpha1.MachineConfigSpec, igntypes.Config, error) {
	sorted := slices.Clone(configs)
	slices.SortFunc(sorted, func(a, b v1alpha1.MachineConfig) int { return strings.Compare(a.Name, b.Name) })

	ignConfigs := make([]igntypes.Config, 0, len(sorted)+1)
	ignConfigs = append(ignConfigs, igntypes.Config{Ignition: igntypes.Ignition{Version: IgnitionVersion}})
	var out v1alpha1.MachineConfigSpec
	seenKarg := map[string]bool{}
	extensions := map[string]bool{}
	for i := range sorted {
		mc := &sorted[i]
		cfg, err := nodeconfig.ParseIgnition(mc.Spec.Config.Raw)
		if err != nil {
			return v1alpha1.MachineConfigSpec{}, igntypes.Config{}, fmt.Errorf("MachineConfig %s: spec.config: %w", mc.Name, err)
		}
		ignConfigs = append(ignConfigs, cfg)
		for _, karg := range mc.Spec.KernelArguments {
			if !seenKarg[karg] {
				seenKarg[karg] = true
				out.KernelArguments = append(out.KernelArguments, karg)
			}
		}
		for _, ext := range mc.Spec.Extensions {
			extensions[ext] = true
		}
		// As OpenShift's MergeMachineConfigs: asking for a non-default
		// kernel in any MachineConfig takes priority, so a later
		// `kernelType: default` (often just stating the default) does not
		// undo an earlier realtime. Between two non-default kernels the
		// last in name order wins, as there; an unknown value counts as
		// non-default, so that validation names it instead of dropping it.
		switch k := mc.Spec.KernelType; k {
		case "":
		case v1alpha1.KernelTypeDefault:
			if out.KernelType == "" {
				out.KernelType = k
			}
		default:
			out.KernelType = k
		}
		if mc.Spec.OSImageURL != "" {
			out.OSImageURL = mc.Spec.OSImageURL
		}
	}
	if err := checkKernelCommandLine(sorted, ignConfigs[1:]); err != nil {
		return v1alpha1.MachineConfigSpec{}, igntypes.Config{}, err
	}
	merged := mergeAll(ignConfigs)
	merged.Ignition.Version = IgnitionVersion
	raw, err := json.Marshal(merged)
	if err != nil {
		return v1alpha1.MachineConfigSpec{}, igntypes.Config{}, fmt.Errorf("encode merged Ignition config: %w", err)
	}
	out.Config = runtime.RawExtension{Raw: raw}
	if len(extensions) > 0 {
		out.Extensions = make([]string, 0, len(extensions))
		for ext := range extensions {
			out.Extensions = append(out.Extensions, ext)
		}
		slices.Sort(out.Extensions)
	}
	enc, err := json.Marshal(out)
	if err != nil {
		return v1alpha1.MachineConfigSpec{}, igntypes.Config{}, fmt.Errorf("encode merged spec: %w", err)
	}
	if len(enc) > MaxRenderedSize {
		names := make([]string, len(sorted))
		for i := range sorted {
			names[i] = sorted[i].Name
		}
		return v1alpha1.MachineConfigSpec{}, igntypes.Config{}, &TooLargeError{Sources: names, Size: len(enc)}
	}
	return out, merged, nil
}

// OSImageURLSource is the name of the MachineConfig whose osImageURL Merge
// takes (the last non-empty one in name order), "" when none has one: so
// that a message about the base image can name the object the user
// wrote, not the rendered one.
func OSImageURLSource(configs []v1alpha1.MachineConfig) string {
	name := ""
	for i := range configs {
		mc := &configs[i]
		if mc.Spec.OSImageURL != "" && (name == "" || mc.Name > name) {
			name = mc.Name
		}
	}
	return name
}
