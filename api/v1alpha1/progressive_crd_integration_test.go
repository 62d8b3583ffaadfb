package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
)

// A pool's progressive rollout is checked at admission, naming the field.
func TestProgressiveRolloutIsValidatedAtAdmission(t *testing.T) {
	ctx := context.Background()
	good := specPool("progressive-good", map[string]any{"progressive": map[string]any{
		"steps":            []any{map[string]any{"nodes": 1, "soakTime": "10m"}, map[string]any{"nodes": "5%"}, map[string]any{"nodes": "25%"}, map[string]any{"nodes": "100%"}},
		"successThreshold": "95%",
	}})
	if err := env.Client.Create(ctx, good); err != nil {
		t.Fatalf("a valid progressive rollout is refused: %v", err)
	}
	step := func(n any) map[string]any { return map[string]any{"nodes": n} }
	for _, c := range []struct {
		name        string
		progressive map[string]any
		want        string
	}{
		{"threshold-over-100", map[string]any{"steps": []any{step(1)}, "successThreshold": "101%"}, "spec.progressive.successThreshold"},
		{"threshold-count", map[string]any{"steps": []any{step(1)}, "successThreshold": 3}, "spec.progressive.successThreshold"},
		{"step-over-100", map[string]any{"steps": []any{step("150%")}}, "spec.progressive.steps[0].nodes"},
		{"no-steps", map[string]any{"steps": []any{}}, "spec.progressive.steps"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := env.Client.Create(ctx, specPool("progressive-"+c.name, map[string]any{"progressive": c.progressive}))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a refusal naming %q", err, c.want)
			}
		})
	}
}
