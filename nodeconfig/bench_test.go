package nodeconfig

import (
	"encoding/json"
	"strconv"
	"testing"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// benchSpec is the benchmarks' configuration: 500 files, 200 units and
// 50 kernel arguments. The renderer's own tests build the same one.
func benchSpec(t testing.TB) *v1alpha1.MachineConfigSpec {
	var cfg ign.Config
	cfg.Ignition.Version = "3.5.0"
	src := "data:;base64,SGVsbG8sIFN0cmF0YSEgVGhpcyBpcyBhIGNvbmZpZ3VyYXRpb24gZmlsZS4K"
	for i := range 500 {
		mode := 0o644
		cfg.Storage.Files = append(cfg.Storage.Files, ign.File{
			Node:          ign.Node{Path: "/etc/strata/bench/d" + strconv.Itoa(i%7) + "/file-" + strconv.Itoa(i) + ".conf"},
			FileEmbedded1: ign.FileEmbedded1{Mode: &mode, Contents: ign.Resource{Source: &src}},
		})
	}
	yes := true
	for i := range 200 {
		c := "[Unit]\nDescription=bench " + strconv.Itoa(i) + "\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
		d := "[Service]\nEnvironment=N=" + strconv.Itoa(i) + "\n"
		cfg.Systemd.Units = append(cfg.Systemd.Units, ign.Unit{Name: "bench-" + strconv.Itoa(i) + ".service", Enabled: &yes, Contents: &c,
			Dropins: []ign.Dropin{{Name: "10-env.conf", Contents: &d}}})
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var kargs []string
	for i := range 50 {
		kargs = append(kargs, "bench.arg"+strconv.Itoa(i)+"=value")
	}
	return &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: raw}, KernelArguments: kargs}
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
