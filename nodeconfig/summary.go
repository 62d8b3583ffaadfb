package nodeconfig

import (
	"cmp"
	"slices"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Unit is what a rendered configuration does to one systemd unit in the
// image, for those who describe an image rather than build it (the SBOM).
type Unit struct {
	Name string `json:"name"`
	// Enabled and Disabled are Ignition's enabled true and false; neither
	// means the unit's enablement is the base image's.
	Enabled  bool `json:"enabled,omitempty"`
	Disabled bool `json:"disabled,omitempty"`
	Masked   bool `json:"masked,omitempty"`
	// Contents is true when the configuration writes the unit file.
	Contents bool `json:"contents,omitempty"`
	// Dropins are the names of the drop-ins it writes, sorted.
	Dropins []string `json:"dropins,omitempty"`
}

// Summary is the part of a configuration that is not obvious from the
// files of its layer: the kernel arguments, each on its own as the kernel
// reads them, and the units with what is done to them.
type Summary struct {
	KernelArguments []string `json:"kernelArguments,omitempty"`
	Units           []Unit   `json:"units,omitempty"`
}

// Summarize reads a rendered MachineConfig spec the way the renderer does. It
// assumes spec renders (the renderer validated it): an Ignition config that does
// not parse is an error, not a partial summary. Units are sorted by name.
func Summarize(spec *v1alpha1.MachineConfigSpec) (*Summary, error) {
	s := &Summary{}
	if spec == nil {
		return s, nil
	}
	for _, entry := range spec.KernelArguments {
		s.KernelArguments = append(s.KernelArguments, splitKernelArguments(entry)...)
	}
	if len(spec.Config.Raw) == 0 {
		return s, nil
	}
	cfg, err := ParseIgnition(spec.Config.Raw)
	if err != nil {
		return nil, err
	}
	for _, u := range cfg.Systemd.Units {
		unit := Unit{
			Name:     u.Name,
			Enabled:  u.Enabled != nil && *u.Enabled,
			Disabled: u.Enabled != nil && !*u.Enabled,
			Masked:   u.Mask != nil && *u.Mask,
			Contents: u.Contents != nil,
		}
		for _, d := range u.Dropins {
			unit.Dropins = append(unit.Dropins, d.Name)
		}
		slices.Sort(unit.Dropins)
		s.Units = append(s.Units, unit)
	}
	slices.SortStableFunc(s.Units, func(a, b Unit) int { return cmp.Compare(a.Name, b.Name) })
	return s, nil
}
