package node

import (
	"errors"
	"sync"
)

// patchConcurrency bounds the Node patches of one reconcile in flight at
// once. A new target goes to maxUnavailable nodes and to those staging
// ahead in the same reconcile: sent one after the other, the last node
// would hear of it a round trip per node after the first, and every
// node's download starts when it hears.
const patchConcurrency = 8

// patchSet collects independent writes and runs them concurrently.
type patchSet struct{ writes []func() error }

func (p *patchSet) add(write func() error) { p.writes = append(p.writes, write) }

// run performs every write, at most patchConcurrency at a time, and
// returns their errors joined.
func (p *patchSet) run() error {
	errs := make([]error, len(p.writes))
	sem := make(chan struct{}, patchConcurrency)
	var wg sync.WaitGroup
	for i, write := range p.writes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = write()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
