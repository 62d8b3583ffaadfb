package nodeconfig

import (
	"crypto/sha256"
	"sync"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/vcontext/report"
)

// Ignition's validator walks the whole config by reflection and costs tens
// of milliseconds for a large config; our own rendering costs a fraction
// of that. The render and build controllers validate the same rendered
// config on every reconcile, so the verdict is kept for the most recent
// configs, by content. Entries are never mutated: BuildPlan only reads the
// config (it clones before sorting).
// The cache holds at most parseCacheSize configs and parseCacheBytes of
// raw config, so that a few huge configs cannot pin much memory.
const (
	parseCacheSize  = 4096 // above the MachineConfigs a large cluster has
	parseCacheBytes = 32 << 20
)

type parseResult struct {
	size int
	cfg  ign.Config
	rpt  report.Report
	err  error
}

type parseCacheT struct {
	mu    sync.Mutex
	m     map[[sha256.Size]byte]*parseResult
	order [][sha256.Size]byte // insertion order, for eviction
	bytes int
}

var parseCache = &parseCacheT{m: map[[sha256.Size]byte]*parseResult{}}

func (c *parseCacheT) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = map[[sha256.Size]byte]*parseResult{}
	c.order = nil
	c.bytes = 0
}

// parseIgnitionCached is parseIgnition, remembered by the sha256 of raw.
func parseIgnitionCached(raw []byte) (ign.Config, report.Report, error) {
	key := sha256.Sum256(raw)
	c := parseCache
	c.mu.Lock()
	r, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return r.cfg, r.rpt, r.err
	}
	cfg, rpt, err := parseIgnition(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok && len(raw) <= parseCacheBytes {
		for len(c.order) > 0 && (len(c.order) >= parseCacheSize || c.bytes+len(raw) > parseCacheBytes) {
			c.bytes -= c.m[c.order[0]].size
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
		c.m[key] = &parseResult{size: len(raw), cfg: cfg, rpt: rpt, err: err}
		c.order = append(c.order, key)
		c.bytes += len(raw)
	}
	return cfg, rpt, err
}
