package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
)

// A pool's topology is checked at admission: the field and what is wrong
// with it are named, and a good one is accepted.
func TestTopologyIsValidatedAtAdmission(t *testing.T) {
	ctx := context.Background()
	good := specPool("topology-good", map[string]any{"topology": map[string]any{
		"key": "topology.kubernetes.io/zone", "maxUnavailable": "50%", "minAvailable": 1,
		"order": "Sequential", "groups": []any{"eu-1c", "eu-1a"},
	}})
	if err := env.Client.Create(ctx, good); err != nil {
		t.Fatalf("a valid topology is refused: %v", err)
	}
	for _, c := range []struct {
		name     string
		topology map[string]any
		want     string
	}{
		{"over-100", map[string]any{"key": "zone", "maxUnavailable": "150%"}, "spec.topology.maxUnavailable"},
		{"zero", map[string]any{"key": "zone", "maxUnavailable": 0}, "spec.topology.maxUnavailable"},
		{"min-over-100", map[string]any{"key": "zone", "minAvailable": "101%"}, "spec.topology.minAvailable"},
		{"no-key", map[string]any{"maxUnavailable": 1}, "spec.topology.key"},
		{"bad-key", map[string]any{"key": "not a label"}, "spec.topology.key"},
		{"bad-order", map[string]any{"key": "zone", "order": "Random"}, "spec.topology.order"},
		{"groups-not-sequential", map[string]any{"key": "zone", "groups": []any{"a"}}, "order: Sequential"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := env.Client.Create(ctx, specPool("topology-"+c.name, map[string]any{"topology": c.topology}))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a refusal naming %q", err, c.want)
			}
		})
	}
}
