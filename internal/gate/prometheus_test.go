package gate

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testprometheus"
)

// gateRules fire two alerts at once and keep a third pending for an hour.
var gateRules = testprometheus.Rules(
	testprometheus.Rule{Alert: "GateTestCritical", Expr: "vector(1)", Labels: map[string]string{"severity": "critical", "team": "storage"}},
	testprometheus.Rule{Alert: "GateTestWarning", Expr: "vector(1)", Labels: map[string]string{"severity": "warning"}},
	testprometheus.Rule{Alert: "GateTestPending", Expr: "vector(1)", For: "1h"},
)

// TestCheckPrometheus asks a real Prometheus, through its HTTP API, what
// each gate asks.
func TestCheckPrometheus(t *testing.T) {
	prom := testprometheus.Start(t, gateRules)
	prom.WaitFiring("GateTestCritical", "GateTestWarning")
	api, err := NewHTTPAPI(prom.URL, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	critical := `GateTestCritical{severity="critical", team="storage"}`
	warning := `GateTestWarning{severity="warning"}`
	cases := []struct {
		name string
		gate v1alpha1.PrometheusGate
		want string // "" passes; else the whole message
	}{
		{"every firing alert, not the pending one", v1alpha1.PrometheusGate{Alerts: &v1alpha1.AlertFilter{}},
			"firing: " + critical + ", " + warning},
		{"by name", v1alpha1.PrometheusGate{Alerts: &v1alpha1.AlertFilter{NameRegexp: "GateTestCrit.*"}}, "firing: " + critical},
		{"the name must match whole", v1alpha1.PrometheusGate{Alerts: &v1alpha1.AlertFilter{NameRegexp: "GateTest"}}, ""},
		{"alternatives", v1alpha1.PrometheusGate{Alerts: &v1alpha1.AlertFilter{NameRegexp: "Other|GateTestWarning"}}, "firing: " + warning},
		{"by label", v1alpha1.PrometheusGate{Alerts: &v1alpha1.AlertFilter{Labels: map[string]string{"severity": "warning"}}}, "firing: " + warning},
		{"every label must match", v1alpha1.PrometheusGate{Alerts: &v1alpha1.AlertFilter{Labels: map[string]string{"severity": "critical", "team": "network"}}}, ""},
		{"ignored by name", v1alpha1.PrometheusGate{Alerts: &v1alpha1.AlertFilter{IgnoreNameRegexp: "GateTestW.*"}}, "firing: " + critical},
		{"a pending alert does not hold", v1alpha1.PrometheusGate{Alerts: &v1alpha1.AlertFilter{NameRegexp: "GateTestPending"}}, ""},
		{"an empty query result passes", v1alpha1.PrometheusGate{Query: "vector(1) > 2"}, ""},
		{"a query that returns series holds", v1alpha1.PrometheusGate{Query: `label_replace(vector(1), "job", "ceph", "", "")`},
			`the query label_replace(vector(1), "job", "ceph", "", "") returned 1 series, the first {job="ceph"}`},
		{"a scalar holds", v1alpha1.PrometheusGate{Query: "1"}, "the query 1 returned a scalar, want an empty vector"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckPrometheus(context.Background(), api, &tc.gate); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	// What cannot be evaluated holds, and says so.
	t.Run("a query Prometheus refuses", func(t *testing.T) {
		got := CheckPrometheus(context.Background(), api, &v1alpha1.PrometheusGate{Query: "up{"})
		if !strings.HasPrefix(got, "could not be evaluated: cannot run the query up{: ") || !strings.HasSuffix(got, "answered 400 Bad Request: bad_data") {
			t.Errorf("got %q", got)
		}
	})
}

// TestPrometheusUnreachableHolds: no server, and a server that is not
// Prometheus, both hold the rollout.
func TestPrometheusUnreachableHolds(t *testing.T) {
	closed := "http://" + refusingAddr(t)
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html>login</html>"))
	}))
	defer html.Close()
	for name, tc := range map[string]struct{ url, want string }{
		"connection refused": {closed, "connection refused"},
		"not Prometheus":     {html.URL, "answered 200 OK, not the Prometheus API's JSON"},
	} {
		t.Run(name, func(t *testing.T) {
			api, err := NewHTTPAPI(tc.url, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range []v1alpha1.PrometheusGate{{Alerts: &v1alpha1.AlertFilter{}}, {Query: "vector(1) > 2"}} {
				got := CheckPrometheus(context.Background(), api, &g)
				if !strings.Contains(got, tc.want) {
					t.Errorf("%+v: got %q, want it to say %q", g, got, tc.want)
				}
			}
		})
	}
}

// refusingAddr returns a loopback address whose connections are refused
// for the whole test: a TCP socket bound to it but never listening holds
// the port. A listener opened and closed would free it for the next one,
// which the kernel may hand out at once (it did: to this test's own
// httptest server).
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

func TestFiringAlertsNamesFiveAtMost(t *testing.T) {
	var alerts []Alert
	for _, n := range []string{"G", "F", "E", "D", "C", "B", "A"} {
		alerts = append(alerts, Alert{Labels: map[string]string{"alertname": n}, State: "firing"}, Alert{Labels: map[string]string{"alertname": n}, State: "firing"})
	}
	got, err := FiringAlerts(&v1alpha1.AlertFilter{}, alerts)
	if err != nil {
		t.Fatal(err)
	}
	if want := "A B C D E and 2 more"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
