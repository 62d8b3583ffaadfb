package nodeconfig

// For the renderer's benchmarks in render_bench_test.go (package
// nodeconfig_test), which render through containerfile and must start
// cold.
var BenchSpec = benchSpec

// ResetParseCache forgets every parsed config.
func ResetParseCache() { parseCache.reset() }
