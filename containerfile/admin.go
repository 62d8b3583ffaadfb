package containerfile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// archOf maps a target architecture, in Go's or the kernel's spelling, to
// the MachineOSConfig's containerfileArch.
func archOf(arch string) (v1alpha1.ContainerfileArch, bool) {
	switch arch {
	case "amd64", "x86_64":
		return v1alpha1.ContainerfileArchAMD64, true
	case "arm64", "aarch64":
		return v1alpha1.ContainerfileArchARM64, true
	case "ppc64le":
		return v1alpha1.ContainerfileArchPPC64LE, true
	case "s390x":
		return v1alpha1.ContainerfileArchS390X, true
	}
	return "", false
}

// adminContent is the admin's Containerfile content for arch: its own
// entry, else the NoArch entry.
type adminContent struct {
	arch     v1alpha1.ContainerfileArch
	content  string
	needsRun bool
}

// ValidateContainerfiles returns what Render would refuse in a
// MachineOSConfig's containerFile entries (fldPath is usually
// field.NewPath("spec", "containerFile")): unknown or repeated
// architectures, Containerfile syntax errors with their line, unknown
// instructions, and FROM, which would start a stage that the rendered
// configuration is not part of.
func ValidateContainerfiles(entries []v1alpha1.MachineOSContainerfile, fldPath *field.Path) field.ErrorList {
	_, errs := selectContainerfile(entries, "", fldPath)
	return errs
}

func selectContainerfile(entries []v1alpha1.MachineOSContainerfile, arch v1alpha1.ContainerfileArch, fldPath *field.Path) (*adminContent, field.ErrorList) {
	var errs field.ErrorList
	var own, noArch *adminContent
	seen := map[v1alpha1.ContainerfileArch]bool{}
	for i, e := range entries {
		p := fldPath.Index(i)
		a := e.ContainerfileArch
		if a == "" {
			a = v1alpha1.ContainerfileArchNoArch
		}
		switch a {
		case v1alpha1.ContainerfileArchAMD64, v1alpha1.ContainerfileArchARM64, v1alpha1.ContainerfileArchPPC64LE,
			v1alpha1.ContainerfileArchS390X, v1alpha1.ContainerfileArchNoArch:
		default:
			errs = append(errs, field.NotSupported(p.Child("containerfileArch"), a, []v1alpha1.ContainerfileArch{
				v1alpha1.ContainerfileArchAMD64, v1alpha1.ContainerfileArchARM64, v1alpha1.ContainerfileArchPPC64LE,
				v1alpha1.ContainerfileArchS390X, v1alpha1.ContainerfileArchNoArch}))
			continue
		}
		if seen[a] {
			errs = append(errs, field.Duplicate(p.Child("containerfileArch"), a))
			continue
		}
		seen[a] = true
		needsRun, ferrs := checkContainerfile(e.Content, p.Child("content"))
		errs = append(errs, ferrs...)
		c := &adminContent{arch: a, content: e.Content, needsRun: needsRun}
		switch a {
		case arch:
			own = c
		case v1alpha1.ContainerfileArchNoArch:
			noArch = c
		}
	}
	if own == nil {
		own = noArch
	}
	return own, errs
}

// checkContainerfile parses content with buildkit's Dockerfile parser and
// checks each instruction, reporting the line of each problem, and says
// whether it runs commands.
func checkContainerfile(content string, fldPath *field.Path) (needsRun bool, errs field.ErrorList) {
	if strings.TrimSpace(content) == "" {
		return false, nil
	}
	res, err := parser.Parse(strings.NewReader(content))
	if err != nil {
		return false, field.ErrorList{field.Invalid(fldPath, lineOf(err), "Containerfile syntax error: "+err.Error())}
	}
	// The content is spliced between Strata's steps and labels, so it
	// must not change how the lines around it parse.
	if res.EscapeToken != '\\' {
		errs = append(errs, field.Invalid(fldPath, "line 1", "the escape parser directive is not supported: the content is part of a larger Containerfile"))
	}
	trimmed := strings.TrimRight(content, " \t\r\n")
	if strings.HasSuffix(trimmed, string(res.EscapeToken)) {
		errs = append(errs, field.Invalid(fldPath, fmt.Sprintf("line %d", strings.Count(trimmed, "\n")+1),
			"the last line ends with a line continuation, which would swallow the next instruction"))
	}
	for _, n := range res.AST.Children {
		line := fmt.Sprintf("line %d", n.StartLine)
		switch strings.ToLower(n.Value) {
		case "from":
			errs = append(errs, field.Invalid(fldPath, line, "FROM is not allowed: the content is added to the rendered image's stage"))
			continue
		case "run":
			needsRun = true
		}
		if _, err := instructions.ParseInstruction(n); err != nil {
			errs = append(errs, field.Invalid(fldPath, line, err.Error()))
		}
	}
	return needsRun, errs
}

// lineOf names the line of a parser error, when it has one.
func lineOf(err error) string {
	var le *parser.LocationError
	if errors.As(err, &le) && len(le.Locations) > 0 && len(le.Locations[0]) > 0 {
		return fmt.Sprintf("line %d", le.Locations[0][0].Start.Line)
	}
	return "content"
}
