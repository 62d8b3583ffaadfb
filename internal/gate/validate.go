package gate

import (
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Validate checks what the API server cannot: that regular expressions
// and CEL expressions compile, that the selectors parse, and that
// apiVersion reads as group/version. It refuses what no gate may do: a
// CEL gate over a Secret, a bearer token to a URL that is not https, and
// a podSelector that selects every pod. Each error names its field under
// spec.gates. The CRD's own validation (one kind per gate, URL schemes,
// lengths) is taken to have run.
func Validate(gates []v1alpha1.RolloutGate) field.ErrorList {
	var errs field.ErrorList
	root := field.NewPath("spec", "gates")
	for i := range gates {
		g := &gates[i]
		p := root.Index(i)
		switch {
		case g.Prometheus != nil:
			pp := p.Child("prometheus")
			if err := credentialsOverHTTPS(g.Prometheus); err != nil {
				errs = append(errs, field.Invalid(pp.Child("url"), g.Prometheus.URL, err.Error()))
			}
			if a := g.Prometheus.Alerts; a != nil {
				ap := pp.Child("alerts")
				for _, re := range []struct{ name, v string }{{"nameRegexp", a.NameRegexp}, {"ignoreNameRegexp", a.IgnoreNameRegexp}} {
					if _, err := compileName(re.v); err != nil {
						errs = append(errs, field.Invalid(ap.Child(re.name), re.v, err.Error()))
					}
				}
			}
		case g.CEL != nil:
			cp := p.Child("cel")
			if isSecret(g.CEL) {
				errs = append(errs, field.Forbidden(cp.Child("kind"), secretRefused))
			}
			if _, err := schema.ParseGroupVersion(g.CEL.APIVersion); err != nil {
				errs = append(errs, field.Invalid(cp.Child("apiVersion"), g.CEL.APIVersion, err.Error()))
			}
			if _, err := compileCEL(g.CEL.Expression); err != nil {
				errs = append(errs, field.Invalid(cp.Child("expression"), g.CEL.Expression, err.Error()))
			}
		case g.BlockingPods != nil:
			bp := p.Child("blockingPods")
			if sel, err := metav1.LabelSelectorAsSelector(&g.BlockingPods.PodSelector); err != nil {
				errs = append(errs, field.Invalid(bp.Child("podSelector"), g.BlockingPods.PodSelector.String(), err.Error()))
			} else if sel.Empty() {
				errs = append(errs, field.Required(bp.Child("podSelector"), errEmptySelector.Error()))
			}
			if ns := g.BlockingPods.NamespaceSelector; ns != nil {
				if _, err := metav1.LabelSelectorAsSelector(ns); err != nil {
					errs = append(errs, field.Invalid(bp.Child("namespaceSelector"), ns.String(), err.Error()))
				}
			}
		}
	}
	return errs
}

// compileName compiles an alert name expression, anchored: it must match
// the whole name, as Prometheus's own =~ matchers do. Empty is nil.
func compileName(s string) (*regexp.Regexp, error) {
	if s == "" {
		return nil, nil
	}
	re, err := regexp.Compile("^(?:" + s + ")$")
	if err != nil {
		// The anchored form is ours; report the user's text.
		if _, err2 := regexp.Compile(s); err2 != nil {
			return nil, err2
		}
		return nil, fmt.Errorf("not a regular expression: %w", err)
	}
	return re, nil
}
