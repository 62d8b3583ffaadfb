package metrics

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "write config/prometheus/prometheusrule.yaml from rules.yaml")

const rulesDir = "../../config/prometheus"

// ruleFile is the part of a Prometheus rule file these tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert"`
			Record string `json:"record"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) ([]byte, ruleFile) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(rulesDir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("rules.yaml: %v", err)
	}
	return raw, f
}

const generatedHeader = `# Generated from rules.yaml by go test ./internal/metrics -run TestPrometheusRule -update.
# Do not edit: edit rules.yaml (which promtool checks and tests) instead.
`

// prometheusRule is rules.yaml's groups as a Prometheus Operator
// PrometheusRule.
func prometheusRule(t *testing.T, raw []byte) []byte {
	t.Helper()
	var groups struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &groups); err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":      "strata",
			"namespace": "strata-system",
			"labels":    map[string]any{"app.kubernetes.io/name": "strata", "app.kubernetes.io/component": "alerts"},
		},
		"spec": map[string]any{"groups": groups.Groups},
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(generatedHeader), out...)
}

// TestPrometheusRule: the PrometheusRule carries exactly the groups of
// rules.yaml.
func TestPrometheusRule(t *testing.T) {
	raw, _ := readRules(t)
	want := prometheusRule(t, raw)
	path := filepath.Join(rulesDir, "prometheusrule.yaml")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from rules.yaml's groups: run go test ./internal/metrics -run TestPrometheusRule -update", path)
	}
}

// promtool runs promtool in config/prometheus. It is not optional:
// make infra (hack/setup-infra.sh) installs it (Debian's prometheus).
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is needed to check the alerting rules: %v (make infra installs Debian's prometheus package)", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = rulesDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestRulesCheck(t *testing.T) {
	promtool(t, "check", "rules", "rules.yaml")
}

// TestRulesUnitTests runs the alerts' unit tests, after checking that
// each alert has a case where it fires and one where it does not.
func TestRulesUnitTests(t *testing.T) {
	_, rules := readRules(t)
	tests, err := filepath.Glob(filepath.Join(rulesDir, "tests", "*.yaml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no rule tests in %s/tests: %v", rulesDir, err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, path := range tests {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: a case where it fires %v, one where it does not %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	args := []string{"test", "rules"}
	for _, p := range tests {
		args = append(args, filepath.Join("tests", filepath.Base(p)))
	}
	promtool(t, args...)
}

// TestRulesReadServedMetrics: every strata_ series a rule reads is one
// this package serves, so that a renamed metric cannot silence an alert.
func TestRulesReadServedMetrics(t *testing.T) {
	_, rules := readRules(t)
	served := map[string]bool{}
	for _, c := range collectors {
		ch := make(chan *prometheus.Desc, 16)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			served[fqName.FindStringSubmatch(d.String())[1]] = true
		}
	}
	name := regexp.MustCompile(`strata_[a-z_]+`)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, m := range name.FindAllString(r.Expr, -1) {
				base := m
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if s, ok := strings.CutSuffix(m, suffix); ok && served[s] {
						base = s
					}
				}
				if !served[base] {
					t.Errorf("rule %s%s reads %s, which Strata does not serve (served: %v)", r.Alert, r.Record, m, slices.Sorted(maps.Keys(served)))
				}
			}
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)
