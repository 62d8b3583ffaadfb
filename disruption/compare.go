package disruption

import (
	"bytes"
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/nodeconfig"
)

const (
	// unitDir is where units, their drop-ins and enablement links live in
	// the image (nodeconfig plans them there).
	unitDir = "/etc/systemd/system"
	// kargsDir holds the image's kernel arguments: bootc applies them
	// when it deploys, and does not notice their change when it
	// soft-reboots (BOOTC.md).
	kargsDir = "/usr/lib/bootc/kargs.d"
)

// Changes is what differs between two rendered configurations.
type Changes struct {
	// Fields that always take a full reboot: a description of each
	// change ("kernelType default -> realtime"), in a fixed order.
	Reboot []string
	// Files are the image's changed files, directories and links, by
	// path, sorted: added, changed (content, mode, owner, target,
	// appends) or removed. Units' own files are not here but in Units.
	Files []string
	// NodeFiles are the changed files, directories and links bound for
	// /var that the daemon writes on the node, sorted.
	NodeFiles []string
	// Units are the names of systemd units added, removed or changed
	// (contents, drop-ins, enabled, mask), sorted.
	Units []string
	// SSHKeys is true when any user's SSH keys changed.
	SSHKeys bool
	// Paths are every changed path of the image, units' own files
	// included, kernel arguments' excluded, sorted: what a live apply
	// writes.
	Paths []string
}

// Empty reports whether nothing changed.
func (c *Changes) Empty() bool {
	return len(c.Reboot) == 0 && len(c.Files) == 0 && len(c.NodeFiles) == 0 && len(c.Units) == 0 && !c.SSHKeys
}

// Compare lists what changed from current to desired, both rendered
// MachineConfig specs; nil is an empty configuration. Either spec failing
// validation is an error naming it: a rendered configuration the renderer
// accepted always passes.
func Compare(current, desired *v1alpha1.MachineConfigSpec) (*Changes, error) {
	a, err := read(current, "current")
	if err != nil {
		return nil, err
	}
	b, err := read(desired, "desired")
	if err != nil {
		return nil, err
	}
	c := &Changes{}
	if a.spec.OSImageURL != b.spec.OSImageURL {
		c.Reboot = append(c.Reboot, fmt.Sprintf("osImageURL %q -> %q", a.spec.OSImageURL, b.spec.OSImageURL))
	}
	if kernelType(a.plan.KernelType) != kernelType(b.plan.KernelType) {
		c.Reboot = append(c.Reboot, fmt.Sprintf("kernelType %s -> %s", kernelType(a.plan.KernelType), kernelType(b.plan.KernelType)))
	}
	if !slices.Equal(a.plan.Packages, b.plan.Packages) {
		c.Reboot = append(c.Reboot, fmt.Sprintf("extensions %v -> %v", sortedSet(a.spec.Extensions), sortedSet(b.spec.Extensions)))
	}
	if !slices.Equal(a.plan.KernelArguments, b.plan.KernelArguments) {
		c.Reboot = append(c.Reboot, fmt.Sprintf("kernel arguments %q -> %q", a.plan.KernelArguments, b.plan.KernelArguments))
	}

	c.Units = changedUnits(a.units, b.units)
	storage := map[string]bool{}
	for p := range a.storage {
		storage[p] = true
	}
	for p := range b.storage {
		storage[p] = true
	}
	for _, p := range changedImagePaths(a.plan, b.plan) {
		if under(p, kargsDir) {
			// Strata's own file there is the kernel arguments, compared
			// above; a storage file there changes them too.
			if storage[p] {
				c.Reboot = append(c.Reboot, "kernel arguments file "+p)
			}
			continue
		}
		c.Paths = append(c.Paths, p)
		// A path under the unit directory that no storage entry wrote
		// was made by the systemd section (a unit, a drop-in, an
		// enablement link): it is named by its unit in Units.
		if len(c.Units) > 0 && under(p, unitDir) && !storage[p] {
			continue
		}
		c.Files = append(c.Files, p)
	}
	c.NodeFiles, c.SSHKeys = changedNodeItems(a.plan.NodeItems, b.plan.NodeItems)
	return c, nil
}

// config is a rendered configuration read once.
type config struct {
	spec    *v1alpha1.MachineConfigSpec
	plan    *nodeconfig.Plan
	units   map[string]ign.Unit
	storage map[string]bool // paths of storage files, directories and links
}

func read(spec *v1alpha1.MachineConfigSpec, which string) (*config, error) {
	if spec == nil {
		spec = &v1alpha1.MachineConfigSpec{}
	}
	p, errs := nodeconfig.BuildPlan(spec, field.NewPath("spec"))
	if len(errs) > 0 {
		return nil, fmt.Errorf("the %s configuration: %w", which, &nodeconfig.ValidationError{Errs: errs})
	}
	cfg, err := nodeconfig.ParseIgnition(spec.Config.Raw)
	if err != nil {
		return nil, fmt.Errorf("the %s configuration: %w", which, err)
	}
	c := &config{spec: spec, plan: p, units: map[string]ign.Unit{}, storage: map[string]bool{}}
	for _, u := range cfg.Systemd.Units {
		// Drop-ins compare as a set by name: their order in the config
		// changes nothing on the node.
		u.Dropins = slices.Clone(u.Dropins)
		slices.SortStableFunc(u.Dropins, func(x, y ign.Dropin) int { return cmp.Compare(x.Name, y.Name) })
		c.units[u.Name] = u
	}
	for _, f := range cfg.Storage.Files {
		c.storage[f.Path] = true
	}
	for _, d := range cfg.Storage.Directories {
		c.storage[d.Path] = true
	}
	for _, l := range cfg.Storage.Links {
		c.storage[l.Path] = true
	}
	return c, nil
}

func kernelType(t v1alpha1.KernelType) v1alpha1.KernelType {
	if t == "" {
		return v1alpha1.KernelTypeDefault
	}
	return t
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func changedUnits(a, b map[string]ign.Unit) []string {
	var out []string
	for name, u := range a {
		if v, ok := b[name]; !ok || !reflect.DeepEqual(u, v) {
			out = append(out, name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// changedImagePaths are the paths whose entry, edit (an append to the
// base image's file) or owner change differs between two plans, sorted.
func changedImagePaths(a, b *nodeconfig.Plan) []string {
	changed := map[string]bool{}
	for p, e := range a.Entries {
		if f, ok := b.Entries[p]; !ok || !sameEntry(e, f) {
			changed[p] = true
		}
	}
	for p := range b.Entries {
		if _, ok := a.Entries[p]; !ok {
			changed[p] = true
		}
	}
	byPath := func(edits []nodeconfig.Edit) map[string]nodeconfig.Edit {
		m := map[string]nodeconfig.Edit{}
		for _, e := range edits {
			m[e.Path] = e
		}
		return m
	}
	ae, be := byPath(a.Edits), byPath(b.Edits)
	for p, e := range ae {
		if f, ok := be[p]; !ok || !reflect.DeepEqual(e, f) {
			changed[p] = true
		}
	}
	for p := range be {
		if _, ok := ae[p]; !ok {
			changed[p] = true
		}
	}
	chowns := func(cs []nodeconfig.Chown) map[string]nodeconfig.Chown {
		m := map[string]nodeconfig.Chown{}
		for _, c := range cs {
			m[c.Path] = c
		}
		return m
	}
	ac, bc := chowns(a.Chowns), chowns(b.Chowns)
	for p, c := range ac {
		if d, ok := bc[p]; !ok || c != d {
			changed[p] = true
		}
	}
	for p := range bc {
		if _, ok := ac[p]; !ok {
			changed[p] = true
		}
	}
	out := make([]string, 0, len(changed))
	for p := range changed {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func sameEntry(a, b *nodeconfig.Entry) bool {
	return a.Type == b.Type && a.Mode == b.Mode && a.UID == b.UID && a.GID == b.GID &&
		a.Target == b.Target && bytes.Equal(a.Data, b.Data)
}

// changedNodeItems are the paths of the daemon's items that differ, and
// whether any SSH keys do.
func changedNodeItems(a, b []nodeconfig.NodeItem) (paths []string, sshKeys bool) {
	key := func(i nodeconfig.NodeItem) string { return string(i.Kind) + "\x00" + i.Path + "\x00" + i.UserName }
	am, bm := map[string]nodeconfig.NodeItem{}, map[string]nodeconfig.NodeItem{}
	for _, i := range a {
		am[key(i)] = i
	}
	for _, i := range b {
		bm[key(i)] = i
	}
	changed := map[string]bool{}
	note := func(i nodeconfig.NodeItem) {
		if i.Kind == nodeconfig.NodeSSHAuthorizedKeys {
			sshKeys = true
			return
		}
		changed[i.Path] = true
	}
	for k, i := range am {
		if j, ok := bm[k]; !ok || !reflect.DeepEqual(i, j) {
			note(i)
		}
	}
	for k, i := range bm {
		if _, ok := am[k]; !ok {
			note(i)
		}
	}
	for p := range changed {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths, sshKeys
}
