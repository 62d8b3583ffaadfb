package nodeconfig

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testconfigs"
)

// benchSpec is the benchmarks' configuration (testconfigs.Large), which
// the renderer's own tests build too.
func benchSpec(t testing.TB) *v1alpha1.MachineConfigSpec {
	spec, err := testconfigs.Large()
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// BenchmarkPlan is the model's share of BenchmarkRender: the same
// configuration planned again, Ignition's verdict cached.
func BenchmarkPlan(b *testing.B) {
	spec := benchSpec(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := BuildPlan(spec, field.NewPath("spec")); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkPlanCold is the model's share of BenchmarkRenderCold.
func BenchmarkPlanCold(b *testing.B) {
	spec := benchSpec(b)
	b.ReportAllocs()
	for b.Loop() {
		parseCache.reset()
		if _, errs := BuildPlan(spec, field.NewPath("spec")); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkParseIgnition is Ignition's parser and validator alone, for
// comparison with BenchmarkRenderCold.
func BenchmarkParseIgnition(b *testing.B) {
	spec := benchSpec(b)
	b.ReportAllocs()
	for b.Loop() {
		// Uncached: ParseIgnition remembers what it parsed.
		if _, _, err := parseIgnition(spec.Config.Raw); err != nil {
			b.Fatal(err)
		}
	}
}
