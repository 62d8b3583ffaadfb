package rollout

import (
	"context"
	"strings"
	"sync"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/machineconfig"
)

// maxRenderedConfigs bounds renderedConfigs: an update needs two (the
// current and the desired), and one staged ahead a third.
const maxRenderedConfigs = 4

// renderedConfigs keeps the rendered configs the daemon read last, by
// name. A rendered config's name ends in the hash of its content
// (machineconfig.RenderedName), so one whose content hashes to its name
// is the same at every read: kept, the desired config read to decide an
// update is not read again to apply it (under a rollout's load each
// read took 0.2-0.4 s), nor is it read again as the current config at
// the next update. One whose content does not match its name (edited by
// hand) is read every time, as before.
type renderedConfigs struct {
	mu    sync.Mutex
	specs map[string]*v1alpha1.MachineConfigSpec
	// order is the names in specs, oldest first: the oldest goes to make
	// room (the current and desired configs are the newest).
	order []string
}

// renderedConfig reads the rendered config name, or returns it as read
// before. The spec returned is shared: callers must not change it.
func (d *Daemon) renderedConfig(ctx context.Context, name string) (*v1alpha1.MachineConfigSpec, error) {
	c := &d.rendered
	c.mu.Lock()
	spec, ok := c.specs[name]
	c.mu.Unlock()
	if ok {
		return spec, nil
	}
	mc, err := d.inputs().MachineConfig(ctx, name)
	if err != nil {
		return nil, err
	}
	if hash, err := machineconfig.Hash(mc.Spec); err == nil && strings.HasSuffix(name, "-"+hash) {
		c.mu.Lock()
		if c.specs == nil {
			c.specs = map[string]*v1alpha1.MachineConfigSpec{}
		}
		if _, ok := c.specs[name]; !ok {
			if len(c.order) >= maxRenderedConfigs {
				delete(c.specs, c.order[0])
				c.order = c.order[1:]
			}
			c.order = append(c.order, name)
		}
		c.specs[name] = &mc.Spec
		c.mu.Unlock()
	}
	return &mc.Spec, nil
}
