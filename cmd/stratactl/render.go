package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/machineconfig"
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
		Use:   "render -f FILE... --base IMAGE [--arch ARCH] -o DIR",
		Short: "Render MachineConfigs and a MachineOSConfig into a Containerfile and build context",
		Long: `render reads MachineConfig and MachineOSConfig objects from YAML or JSON files
(several documents per file are fine), validates each MachineConfig as the
cluster would, merges them in name order as a pool does, and writes the
Containerfile and build context the pool's image would be built from.

The pool is the MachineOSConfig's; without one, name it with --pool. The base
image must be given by digest (--base, else the MachineOSConfig's
baseImagePullSpec, else the merged osImageURL).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "file with MachineConfigs and MachineOSConfigs (repeatable; - is standard input)")
	f.StringVar(&o.base, "base", "", "base OS image as registry/repository@sha256:digest")
	f.StringVar(&o.arch, "arch", runtime.GOARCH, "target architecture: amd64, arm64, ppc64le or s390x")
	f.StringVar(&o.pool, "pool", "", "pool name when no MachineOSConfig is given")
	f.StringVarP(&o.out, "output", "o", "", "directory to write the build context to (must be empty or absent)")
	f.StringVar(&o.nodeItems, "node-items", "", "file to write the /var-bound items the daemon would write, as JSON")
	_ = cmd.MarkFlagRequired("filename")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// object is one decoded document, with where it came from for messages.
type object struct {
	file string
	doc  int
	mc   *v1alpha1.MachineConfig
	mosc *v1alpha1.MachineOSConfig
}

func (o object) where() string {
	switch {
	case o.mc != nil:
		return fmt.Sprintf("%s: MachineConfig %s", o.file, o.mc.Name)
	case o.mosc != nil:
		return fmt.Sprintf("%s: MachineOSConfig %s", o.file, o.mosc.Name)
	}
	return fmt.Sprintf("%s: document %d", o.file, o.doc)
}

func (o *renderOptions) run(stdout io.Writer) error {
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
	names := map[string]string{}
	for _, obj := range objs {
		switch {
		case obj.mc != nil:
			if prev, ok := names[obj.mc.Name]; ok {
				problems = append(problems, fmt.Sprintf("%s: also defined in %s", obj.where(), prev))
				continue
			}
			names[obj.mc.Name] = obj.file
			for _, e := range containerfile.ValidateMachineConfigSpec(&obj.mc.Spec, field.NewPath("spec")) {
				problems = append(problems, fmt.Sprintf("%s: %v", obj.where(), e))
			}
			mcs = append(mcs, *obj.mc)
		case obj.mosc != nil:
			for _, e := range containerfile.ValidateContainerfiles(obj.mosc.Spec.ContainerFile, field.NewPath("spec", "containerFile")) {
				problems = append(problems, fmt.Sprintf("%s: %v", obj.where(), e))
			}
			moscs = append(moscs, obj)
		}
	}
	var mosc *v1alpha1.MachineOSConfig
	switch {
	case len(moscs) > 1 && o.pool == "":
		problems = append(problems, fmt.Sprintf("%d MachineOSConfigs given; choose one with --pool", len(moscs)))
	case len(moscs) > 0:
		for _, m := range moscs {
			if o.pool == "" || m.mosc.Spec.MachineConfigPool.Name == o.pool {
				if mosc != nil {
					problems = append(problems, fmt.Sprintf("%s: a second MachineOSConfig for pool %s", m.where(), o.pool))
					continue
				}
				mosc = m.mosc
			}
		}
		if mosc == nil {
			problems = append(problems, fmt.Sprintf("no MachineOSConfig for pool %s", o.pool))
		}
	}
	if len(mcs) == 0 {
		problems = append(problems, "no MachineConfig given")
	}
	if err := checkOutput(o.out); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return errors.New("cannot render:\n  " + strings.Join(problems, "\n  "))
	}

	pool := o.pool
	var cfs []v1alpha1.MachineOSContainerfile
	base := o.base
	if mosc != nil {
		pool = mosc.Spec.MachineConfigPool.Name
		cfs = mosc.Spec.ContainerFile
		if base == "" {
			base = mosc.Spec.BaseImagePullSpec
		}
	}
	if pool == "" {
		return errors.New("cannot render: no MachineOSConfig given; name the pool with --pool")
	}
	spec, err := machineconfig.Merge(mcs)
	if err != nil {
		return fmt.Errorf("cannot render: merge: %w", err)
	}
	if base == "" {
		base = spec.OSImageURL
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
		var verr *containerfile.ValidationError
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
	fmt.Fprintf(stdout, "input hash %s, needs RUN steps: %v, items for the node: %d\n", res.InputHash, res.NeedsRun, len(res.NodeItems))
	return nil
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

// readObjects decodes every document of a file. Unknown kinds and fields
// are errors, so that a typo is not silently ignored.
func readObjects(file string) ([]object, error) {
	var r io.Reader
	if file == "-" {
		r = os.Stdin
		file = "<stdin>"
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var objs []object
	var problems []string
	for doc := 1; ; doc++ {
		raw, err := yr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return objs, fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isOnlyComments(raw) {
			continue
		}
		obj := object{file: file, doc: doc}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(raw, &meta); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", obj.where(), err))
			continue
		}
		what := fmt.Sprintf("%s: %s %s", file, meta.Kind, meta.Metadata.Name)
		gv, err := schema.ParseGroupVersion(meta.APIVersion)
		if err != nil || gv != v1alpha1.GroupVersion {
			problems = append(problems, fmt.Sprintf("%s (document %d): apiVersion: %q is not %s", what, doc, meta.APIVersion, v1alpha1.GroupVersion))
			continue
		}
		if meta.Metadata.Name == "" {
			problems = append(problems, fmt.Sprintf("%s (document %d): metadata.name: Required value", what, doc))
			continue
		}
		var target any
		switch meta.Kind {
		case "MachineConfig":
			obj.mc = &v1alpha1.MachineConfig{}
			target = obj.mc
		case "MachineOSConfig":
			obj.mosc = &v1alpha1.MachineOSConfig{}
			target = obj.mosc
		default:
			problems = append(problems, fmt.Sprintf("%s (document %d): kind: %q is not MachineConfig or MachineOSConfig", what, doc, meta.Kind))
			continue
		}
		if err := yaml.UnmarshalStrict(raw, target); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", what, err))
			continue
		}
		objs = append(objs, obj)
	}
	if len(problems) > 0 {
		return objs, errors.New(strings.Join(problems, "\n  "))
	}
	return objs, nil
}

func isOnlyComments(raw []byte) bool {
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return false
		}
	}
	return true
}
