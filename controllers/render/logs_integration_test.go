package render

import (
	"context"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// TestLogsTransitions: an operator reading the controller's log sees each
// transition of a pool, with the rendered config's name.
func TestLogsTransitions(t *testing.T) {
	logs := testenv.NewLogs(1)
	env.StartManager(t, ctrl.Options{Logger: logs.Logger()}, func(mgr ctrl.Manager) error { return setup(mgr, 1) })
	newPool(t, "logs", map[string]string{"logs": "true"})
	labels := map[string]string{"logs": "true"}
	mc := newMC(t, "logs-a", labels, map[string]string{"/etc/a": "1"})
	first := waitRendered(t, "logs", "logs-a").Name
	logs.Wait(t, timeout, "Pool has a new rendered config", map[string]string{"name": "logs", "renderedConfig": first, "sources": "1"})
	logs.Wait(t, timeout, "Created rendered config", map[string]string{"name": "logs", "renderedConfig": first, "level": "1"})

	newMC(t, "logs-bad", labels, map[string]string{"/proc/x": "1"})
	logs.Wait(t, timeout, "Pool cannot render its MachineConfigs and keeps its configuration",
		map[string]string{"name": "logs", "reason": v1alpha1.ReasonInvalidConfig, "renderedConfig": first, "sources": "2"})
	deleteMC(t, "logs-bad")
	logs.Wait(t, timeout, "Pool renders its MachineConfigs again", map[string]string{"name": "logs", "renderedConfig": first})

	// Two changes: with a history of one, the first config goes.
	for _, v := range []string{"2", "3"} {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(mc), mc); err != nil {
			t.Fatal(err)
		}
		mc.Spec.Config = fileConfig(map[string]string{"/etc/a": v})
		if err := env.Client.Update(context.Background(), mc); err != nil {
			t.Fatal(err)
		}
		entry := logs.Wait(t, timeout, "Pool has a new rendered config", map[string]string{"name": "logs", "previousConfig": first})
		first = entry["renderedConfig"].(string)
	}
	logs.Wait(t, timeout, "Deleted an unused rendered config", map[string]string{"name": "logs"})
}
