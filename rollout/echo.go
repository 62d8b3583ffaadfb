package rollout

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// ownWrites remembers the annotation values the daemon last patched onto
// its Node, so that the watch event of its own patch does not start
// another sync: the sync that patched already went on from the patched
// node (flush reads the patch response), so a sync for the echo would
// only read bootc's status again and find nothing to do. Under a
// rollout's load such a sync cost a `bootc status` and a GET per patch.
//
// An event is an echo only when every change it carries is an
// annotation value this daemon wrote: anyone else's change (the
// controller's, a person's, kwok's Ready condition), even to one of the
// daemon's own keys (a person removing the state), still syncs, and so
// does the periodic resync.
type ownWrites struct {
	mu     sync.Mutex
	values map[string]string
}

// wrote records annotation values just patched.
func (w *ownWrites) wrote(annotations map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.values == nil {
		w.values = map[string]string{}
	}
	maps.Copy(w.values, annotations)
}

// echo reports whether the update from before to after changed nothing but
// annotations to values this daemon wrote.
func (w *ownWrites) echo(before, after *corev1.Node) bool {
	if before == nil || after == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := false
	for k, v := range after.Annotations {
		if ov, ok := before.Annotations[k]; ok && ov == v {
			continue
		}
		if mine, ok := w.values[k]; !ok || mine != v {
			return false
		}
		changed = true
	}
	for k := range before.Annotations {
		if _, ok := after.Annotations[k]; !ok {
			// The daemon never removes an annotation.
			return false
		}
	}
	if !changed {
		return false
	}
	// Everything but the annotations and the write's own bookkeeping
	// must be as it was.
	o, n := before.DeepCopy(), after.DeepCopy()
	for _, m := range []*corev1.Node{o, n} {
		m.Annotations, m.ResourceVersion, m.ManagedFields, m.Generation = nil, "", nil, 0
	}
	return equality.Semantic.DeepEqual(o, n)
}
