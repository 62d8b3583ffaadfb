package nodeconfig

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Warnings are what spec's Ignition config holds that Strata accepts but
// ignores, as OpenShift does (the Ignition 2.x leftovers of leftoverNote),
// each as "FIELD: message" with the field under fldPath. A person should
// hear of them, since the config does not say what it seems to; nothing
// is refused for them. A config Strata refuses has none.
func Warnings(spec *v1alpha1.MachineConfigSpec, fldPath *field.Path) []string {
	_, rpt, err := parseIgnitionCached(spec.Config.Raw)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range rpt.Entries {
		if _, ok := e.Kind.(leftover); !ok {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s", reportPath(fldPath.Child("config"), e.Context.Path), e.Message))
	}
	return out
}

// reportPath is the field path of a report entry's path under fldPath:
// spec.config.storage.files[0].path rather than $.storage.files.0.path.
func reportPath(fldPath *field.Path, p []any) *field.Path {
	for _, elem := range p {
		switch v := elem.(type) {
		case int:
			fldPath = fldPath.Index(v)
		default:
			fldPath = fldPath.Child(fmt.Sprint(v))
		}
	}
	return fldPath
}
