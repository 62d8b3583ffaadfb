package direct

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/strata-dev/strata/test/testregistry"
)

// BenchmarkBuild builds on a synthetic base of STRATA_BENCH_BASE_MIB MiB
// (default 256) in a real registry, each operation with a new layer:
//
//   - same-repo: the target is in the base's repository (blobs present);
//   - other-repo: a new repository of the base's registry each time (every
//     base layer mounted);
//   - other-registry: a new repository of another registry each time
//     (every base layer copied, streamed).
//
// Besides ns/op it reports the bytes the process allocated per build and
// Build's own layer and push times.
func BenchmarkBuild(b *testing.B) {
	mib := 256
	if s := os.Getenv("STRATA_BENCH_BASE_MIB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("STRATA_BENCH_BASE_MIB=%q: want a positive number of MiB", s)
		}
		mib = n
	}
	src := testregistry.Start(b, regPass)
	dst := testregistry.Start(b, "other-Passw0rd")
	img, err := SyntheticBase(mib, 1)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	base := src.Push(b, "bench/base:latest", img)
	b.Logf("pushed a %d MiB synthetic base in %v", mib, time.Since(start).Round(time.Millisecond))

	n := 0 // every build gets a layer and a target of its own
	for _, c := range []struct {
		name   string
		target func(n int) string
	}{
		{"same-repo", func(n int) string { return fmt.Sprintf("%s/bench/base:config-%d", src.Host, n) }},
		{"other-repo", func(n int) string { return fmt.Sprintf("%s/bench/configs-%d:latest", src.Host, n) }},
		{"other-registry", func(n int) string { return fmt.Sprintf("%s/bench/copy-%d:latest", dst.Host, n) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			reqs := make([]Request, b.N)
			for i := range reqs {
				n++
				reqs[i] = request(base, c.target(n), testLayer(b, strconv.Itoa(n)), src, dst)
			}
			var layerTime, pushTime time.Duration
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := range b.N {
				res, err := Build(context.Background(), reqs[i])
				if err != nil {
					b.Fatal(err)
				}
				layerTime += res.LayerTime
				pushTime += res.PushTime
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N), "alloc-bytes/op")
			b.ReportMetric(float64(layerTime.Microseconds())/1e3/float64(b.N), "layer-ms/op")
			b.ReportMetric(float64(pushTime.Microseconds())/1e3/float64(b.N), "push-ms/op")
			b.ReportMetric(float64(mib), "base-MiB")
		})
	}
}
