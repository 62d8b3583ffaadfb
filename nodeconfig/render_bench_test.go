package nodeconfig_test

import (
	"testing"

	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/nodeconfig"
)

// The renderer's benchmarks live here, beside the model, because a cold
// render must start without ParseIgnition's cache, which only this
// package's tests can reset (export_test.go). Run them with
//
//	go test -run '^$' -bench BenchmarkRender -benchmem ./nodeconfig/

const benchBase = "registry.example.com/os/base@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func benchInput(t testing.TB) containerfile.Input {
	return containerfile.Input{ConfigName: "rendered-worker-bench", Pool: "worker", Arch: "amd64", BaseImage: benchBase,
		Spec: nodeconfig.BenchSpec(t)}
}

// BenchmarkRender renders the same configuration again, as the
// controllers do on every reconcile: Ignition's verdict is cached.
func BenchmarkRender(b *testing.B) {
	in := benchInput(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := containerfile.Render(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderCold renders a configuration never seen before: most of
// the time is Ignition's own validator.
func BenchmarkRenderCold(b *testing.B) {
	in := benchInput(b)
	b.ReportAllocs()
	for b.Loop() {
		nodeconfig.ResetParseCache()
		if _, err := containerfile.Render(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenderBudget keeps the benchmark's promise in every test run: the
// big configuration renders with well under 50 MB of allocations.
func TestRenderBudget(t *testing.T) {
	in := benchInput(t)
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			nodeconfig.ResetParseCache()
			if _, err := containerfile.Render(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	if per := allocs.AllocedBytesPerOp(); per > 50<<20 {
		t.Errorf("render allocates %d bytes, budget 50 MB", per)
	}
}
