package nodeconfig

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// NodeSplit is what a rendered configuration asks of the node itself and
// what only an image can carry.
type NodeSplit struct {
	// NodeItems are the /var-bound items and SSH keys the daemon writes,
	// in the order the renderer returns them.
	NodeItems []NodeItem
	// ImageOnly describes, one line per kind, the content that only an
	// image can carry (files, links and directories outside /var, units,
	// kernel arguments, extensions, a kernel type). A pool without a
	// MachineOSConfig builds no image, so the rollout controller reports
	// these instead of dropping them silently.
	ImageOnly []string
}

// SplitForNode validates spec like the renderer and splits it into the daemon's
// part and the image's part. The daemon calls it on the desired rendered
// config to learn what to write; the rollout controller calls it to report
// image-only content of pools that build no image.
func SplitForNode(spec *v1alpha1.MachineConfigSpec) (*NodeSplit, error) {
	if spec == nil {
		spec = &v1alpha1.MachineConfigSpec{}
	}
	p, errs := BuildPlan(spec, field.NewPath("spec"))
	if len(errs) > 0 {
		return nil, &ValidationError{Errs: errs}
	}
	s := &NodeSplit{NodeItems: slices.Clone(p.NodeItems)}
	var files, units int
	for path := range p.Entries {
		switch {
		case path == kargsPath:
		case underUnitDir(path):
			units++
		default:
			files++
		}
	}
	files += len(p.Edits)
	if files > 0 {
		s.ImageOnly = append(s.ImageOnly, fmt.Sprintf("%d files, directories or links outside /var", files))
	}
	if units > 0 || len(p.Enable) > 0 || len(p.Disable) > 0 {
		s.ImageOnly = append(s.ImageOnly, fmt.Sprintf("%d systemd unit entries", units+len(p.Enable)+len(p.Disable)))
	}
	if len(p.KernelArguments) > 0 {
		s.ImageOnly = append(s.ImageOnly, fmt.Sprintf("%d kernel arguments", len(p.KernelArguments)))
	}
	if len(p.Packages) > 0 {
		s.ImageOnly = append(s.ImageOnly, fmt.Sprintf("extensions %v", p.Packages))
	}
	if p.KernelType != "" && p.KernelType != v1alpha1.KernelTypeDefault {
		s.ImageOnly = append(s.ImageOnly, "kernelType "+string(p.KernelType))
	}
	return s, nil
}

// underUnitDir tells a unit, drop-in or enablement link from other files.
func underUnitDir(p string) bool {
	_, ok := underAny(p, []string{"/etc/systemd/system"})
	return ok
}
