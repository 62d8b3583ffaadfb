package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/internal/imageref"
	"github.com/strata-dev/strata/machineconfig"
	"github.com/strata-dev/strata/nodeconfig"
)

type renderOptions struct {
	files     []string
	base      string
	arch      string
	pool      string
	out       string
	nodeItems string
}

func newRenderCommand() *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render -f FILE... [--pool NAME] --base IMAGE [--arch ARCH] -o DIR",
		Short: "Render a pool's MachineConfigs and MachineOSConfig into a Containerfile and build context",
		Long: `render reads MachineConfigs, MachineConfigPools and MachineOSConfigs from YAML
or JSON files (several documents per file, and kind List, are fine), selects
the MachineConfigs of one pool as the render controller does, checks them as
the cluster would, merges them in name order, and writes the Containerfile
and build context the pool's image would be built from.

The pool is the one named by --pool; without --pool, the one pool the input
names (by a MachineConfigPool or by a MachineOSConfig's machineConfigPool).
Input that names several pools needs --pool: render each pool on its own,
into its own directory, so that no pool's configuration ends up in another
pool's image. A MachineOSConfig is used for its own pool only.

The pool selects MachineConfigs by the machineConfigSelector of its
MachineConfigPool when the input has it, else by the role label: --pool
worker selects the MachineConfigs labelled
machineconfiguration.strata.dev/role=worker. Give the MachineConfigPool for
any other selection (a custom pool that also takes the worker's configs, for
example). Rendered MachineConfigs are never selected. Every document must
decode as the API server decodes it (an unknown field is an error); the
MachineConfigs the pool selects are checked as the render controller checks
them.

OpenShift's machineconfiguration.openshift.io/v1 MachineConfigs and
MachineConfigPools are read as they are, with the label
machineconfiguration.openshift.io/role taken for
machineconfiguration.strata.dev/role, so that they can be tried before they
are converted. Of an OpenShift MachineConfigPool only the name and
machineConfigSelector are used.

The base image must be given by digest (--base, else the MachineOSConfig's
baseImagePullSpec, else the merged osImageURL).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "file with MachineConfigs, MachineConfigPools and MachineOSConfigs (repeatable; - is standard input)")
	f.StringVar(&o.base, "base", "", "base OS image as registry/repository@sha256:digest")
	f.StringVar(&o.arch, "arch", runtime.GOARCH, "target architecture: amd64, arm64, ppc64le or s390x")
	f.StringVar(&o.pool, "pool", "", "the pool to render; needed when the input names several pools or none")
	f.StringVarP(&o.out, "output", "o", "", "directory to write the build context to (must be empty or absent)")
	f.StringVar(&o.nodeItems, "node-items", "", "file to write the /var-bound items the daemon would write, as JSON")
	_ = cmd.MarkFlagRequired("filename")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func (o *renderOptions) run(stdout, stderr io.Writer) error {
	// Warnings: what renders, but not as the input seems to say. They are
	// printed whether or not the render succeeds.
	var warnings []string
	defer func() {
		for _, w := range warnings {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
	}()
	var objs []object
	var problems []string
	for _, f := range o.files {
		got, err := readObjects(f)
		if err != nil {
			problems = append(problems, err.Error())
		}
		objs = append(objs, got...)
	}

	var mcs []v1alpha1.MachineConfig
	var moscs []object
	pools := map[string]object{}
	mcNames := map[string]string{}
	mcObjs := map[string]object{}
	openShiftRole := map[string]bool{}
	for _, obj := range objs {
		switch {
		case obj.mc != nil:
			if prev, ok := mcNames[obj.mc.Name]; ok {
				problems = append(problems, fmt.Sprintf("%s: also defined in %s", obj.where(), prev))
				continue
			}
			mcNames[obj.mc.Name] = obj.file
			mcObjs[obj.mc.Name] = obj
			if _, ok := obj.mc.Labels[v1alpha1.RoleLabel]; ok {
				openShiftRole[obj.mc.Name] = obj.openShiftRole
			}
			// What the API server refuses of any MachineConfig; the
			// renderer's checks follow for the ones the pool selects.
			for _, e := range validateUnsupportedFields(&obj.mc.Spec, field.NewPath("spec")) {
				problems = append(problems, fmt.Sprintf("%s: MachineConfig %s: %v", obj.at(e.Field), obj.mc.Name, e))
			}
			mcs = append(mcs, *obj.mc)
		case obj.mcp != nil:
			if prev, ok := pools[obj.mcp.Name]; ok {
				problems = append(problems, fmt.Sprintf("%s: also defined in %s", obj.where(), prev.file))
				continue
			}
			pools[obj.mcp.Name] = obj
		case obj.mosc != nil:
			for _, e := range containerfile.ValidateContainerfiles(obj.mosc.Spec.ContainerFile, field.NewPath("spec", "containerFile")) {
				problems = append(problems, fmt.Sprintf("%s: %v", obj.where(), e))
			}
			moscs = append(moscs, obj)
		}
	}

	pool, err := choosePool(o.pool, pools, moscs)
	if err != nil {
		problems = append(problems, err.Error())
	}

	var mosc *v1alpha1.MachineOSConfig
	for _, m := range moscs {
		if m.mosc.Spec.MachineConfigPool.Name != pool {
			continue
		}
		if mosc != nil {
			problems = append(problems, fmt.Sprintf("%s: a second MachineOSConfig for pool %s", m.where(), pool))
			continue
		}
		mosc = m.mosc
	}

	var selected, others []v1alpha1.MachineConfig
	if len(mcs) == 0 {
		problems = append(problems, "no MachineConfig given")
	} else if pool != "" {
		selector, from, where, openShiftSelector := poolSelector(pool, pools, openShiftRole)
		selected, others, err = machineconfig.Select(selector, mcs)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", where, err))
		case len(selected) == 0:
			problems = append(problems, fmt.Sprintf("pool %s selects no MachineConfig: %s; the pool's selector is %s (%s)",
				pool, describeUnselected(others, 10, openShiftRole), describeSelector(selector, openShiftSelector), from))
		}
	}
	for i := range selected {
		mc := &selected[i]
		obj := mcObjs[mc.Name]
		for _, e := range nodeconfig.ValidateMachineConfigSpec(&mc.Spec, field.NewPath("spec")) {
			problems = append(problems, fmt.Sprintf("%s: MachineConfig %s: %v", obj.at(e.Field), mc.Name, e))
		}
		for _, w := range nodeconfig.Warnings(&mc.Spec, field.NewPath("spec")) {
			fld, _, _ := strings.Cut(w, ": ")
			warnings = append(warnings, fmt.Sprintf("%s: MachineConfig %s: %s", obj.at(fld), mc.Name, w))
		}
	}
	if err := checkOutput(o.out); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return errors.New("cannot render:\n  " + strings.Join(problems, "\n  "))
	}

	var cfs []v1alpha1.MachineOSContainerfile
	if mosc != nil {
		cfs = mosc.Spec.ContainerFile
	}
	spec, err := machineconfig.Merge(selected)
	if err != nil {
		return fmt.Errorf("cannot render: merge: %w", err)
	}
	base, baseFrom, overrides := chooseBase(o.base, mosc, spec.OSImageURL, mcObjs[machineconfig.OSImageURLSource(selected)])
	if overrides != "" {
		warnings = append(warnings, overrides)
	}
	if base != "" && !imageref.ValidPinned(base) {
		return fmt.Errorf("cannot render:\n  %s: Invalid value: %q: must be registry/repository@sha256:<digest>: builds must reproduce, and render cannot resolve a tag", baseFrom, base)
	}
	hash, err := machineconfig.Hash(spec)
	if err != nil {
		return err
	}
	name := machineconfig.RenderedName(pool, hash)
	res, err := containerfile.Render(containerfile.Input{
		ConfigName: name, Pool: pool, Spec: &spec, BaseImage: base, Arch: o.arch, Containerfiles: cfs,
	})
	if err != nil {
		var verr *nodeconfig.ValidationError
		if errors.As(err, &verr) {
			lines := make([]string, len(verr.Errs))
			for i, e := range verr.Errs {
				lines[i] = fmt.Sprintf("%s: %v", renderedWhere(e.Field, name, mosc), e)
			}
			return errors.New("cannot render:\n  " + strings.Join(lines, "\n  "))
		}
		return err
	}
	if err := res.WriteDir(o.out); err != nil {
		return fmt.Errorf("write build context: %w", err)
	}
	if o.nodeItems != "" {
		data, err := json.MarshalIndent(res.NodeItems, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.nodeItems, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("write node items: %w", err)
		}
	}
	fmt.Fprintf(stdout, "Rendered %s for pool %s into %s\n", name, pool, o.out)
	names := make([]string, len(selected))
	for i := range selected {
		names[i] = selected[i].Name
	}
	fmt.Fprintf(stdout, "MachineConfigs merged (%d): %s\n", len(selected), strings.Join(names, ", "))
	if len(others) > 0 {
		fmt.Fprintf(stdout, "not selected by the pool: %s\n", describeUnselected(others, 0, openShiftRole))
	}
	fmt.Fprintf(stdout, "input hash %s, needs RUN steps: %v, items for the node: %d\n", res.InputHash, res.NeedsRun, len(res.NodeItems))
	return nil
}

// chooseBase is the base image the build is made FROM, as the build
// controller chooses it (--base standing in for the MachineOSConfig's
// baseImagePullSpec, and before it), and where it came from for messages.
// When the base overrides a MachineConfig's osImageURL, overrides says so,
// as the controller's conditions do: OpenShift would build on the
// osImageURL.
func chooseBase(flag string, mosc *v1alpha1.MachineOSConfig, osImageURL string, source object) (base, from, overrides string) {
	mcFrom := ""
	if source.mc != nil {
		mcFrom = fmt.Sprintf("%s: MachineConfig %s: spec.osImageURL", source.at("spec.osImageURL"), source.mc.Name)
	}
	switch {
	case flag != "":
		base, from = flag, "--base"
	case mosc != nil && mosc.Spec.BaseImagePullSpec != "":
		base, from = mosc.Spec.BaseImagePullSpec, "MachineOSConfig "+mosc.Name+": spec.baseImagePullSpec"
	default:
		return osImageURL, mcFrom, ""
	}
	if osImageURL != "" && osImageURL != base {
		overrides = fmt.Sprintf("%s %q overrides %s %q: the image is built FROM %s; OpenShift would build on the osImageURL", from, base, mcFrom, osImageURL, base)
	}
	return base, from, overrides
}

// choosePool is the pool named by --pool, else the one pool the input
// names by a MachineConfigPool or a MachineOSConfig.
func choosePool(flag string, pools map[string]object, moscs []object) (string, error) {
	if flag != "" {
		return flag, nil
	}
	named := map[string]bool{}
	for name := range pools {
		named[name] = true
	}
	for _, m := range moscs {
		named[m.mosc.Spec.MachineConfigPool.Name] = true
	}
	switch names := slices.Sorted(maps.Keys(named)); len(names) {
	case 0:
		return "", errors.New("no pool: name it with --pool, or give its MachineConfigPool or MachineOSConfig")
	case 1:
		return names[0], nil
	default:
		return "", fmt.Errorf("the input names %d pools (%s); render one at a time with --pool", len(names), strings.Join(names, ", "))
	}
}

// poolSelector is the pool's machineConfigSelector when its
// MachineConfigPool is given, else the role label; from says which for
// messages, where names the selector's place for its errors. openShift
// says to name the role label as OpenShift's: the pool's selector wrote
// it so, or, for the role label, a MachineConfig of the input did
// (openShiftRole, by MachineConfig name) and none wrote Strata's.
func poolSelector(pool string, pools map[string]object, openShiftRole map[string]bool) (selector *metav1.LabelSelector, from, where string, openShift bool) {
	if p, ok := pools[pool]; ok {
		return p.mcp.Spec.MachineConfigSelector, "spec.machineConfigSelector of " + p.where(), p.where() + ": spec.machineConfigSelector", p.openShiftRole
	}
	openShift = len(openShiftRole) > 0
	for _, o := range openShiftRole {
		openShift = openShift && o
	}
	return roleSelector(pool), "the role label, as no MachineConfigPool " + pool + " is given", "--pool", openShift
}

// renderedWhere names the object an error of the merged render is about.
func renderedWhere(path, rendered string, mosc *v1alpha1.MachineOSConfig) string {
	switch {
	case strings.HasPrefix(path, "spec.containerFile") && mosc != nil:
		return "MachineOSConfig " + mosc.Name
	case strings.HasPrefix(path, "spec."):
		return "rendered MachineConfig " + rendered + " (merged)"
	}
	return "flags"
}

// checkOutput refuses a directory with files in it: stale files of an
// earlier render would end up in the build context.
func checkOutput(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("output directory: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("output directory %s is not empty", dir)
	}
	return nil
}
