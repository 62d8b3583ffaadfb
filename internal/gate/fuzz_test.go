package gate

import (
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// FuzzValidate feeds user text to the compilers of alert names and CEL
// expressions: Validate must not panic, and what it accepts must compile
// again where the gate is evaluated (no text passes one and fails the
// other).
func FuzzValidate(f *testing.F) {
	for _, s := range []string{"", "Node.*", "(", "a|b", `object.status.health == "HEALTH_OK"`, "object.x >", "1 + 2", `has(object.a) || object.a.b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gates := []v1alpha1.RolloutGate{
			{Name: "a", Prometheus: &v1alpha1.PrometheusGate{Alerts: &v1alpha1.AlertFilter{NameRegexp: s}}},
			{Name: "c", CEL: &v1alpha1.CELGate{APIVersion: "v1", Kind: "ConfigMap", Name: "x", Expression: s}},
		}
		errs := Validate(gates)
		reOK, celOK := true, true
		for _, e := range errs {
			switch e.Field {
			case "spec.gates[0].prometheus.alerts.nameRegexp":
				reOK = false
			case "spec.gates[1].cel.expression":
				celOK = false
			}
		}
		if _, err := FiringAlerts(gates[0].Prometheus.Alerts, nil); (err == nil) != reOK {
			t.Errorf("nameRegexp %q: Validate says ok=%v, evaluation says %v", s, reOK, err)
		}
		if _, err := compileCEL(s); (err == nil) != celOK {
			t.Errorf("expression %q: Validate says ok=%v, compiling says %v", s, celOK, err)
		}
	})
}
