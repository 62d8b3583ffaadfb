package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func validGates() []v1alpha1.RolloutGate {
	return []v1alpha1.RolloutGate{
		{Name: "alerts", Prometheus: &v1alpha1.PrometheusGate{
			URL:               "https://prometheus.monitoring.svc:9091/prom",
			Alerts:            &v1alpha1.AlertFilter{NameRegexp: "Ceph.*", IgnoreNameRegexp: "Watchdog", Labels: map[string]string{"severity": "critical"}},
			CA:                &v1alpha1.CABundleSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, Key: "ca.crt"}},
			BearerTokenSecret: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "token"},
		}},
		{Name: "query", Prometheus: &v1alpha1.PrometheusGate{URL: "http://127.0.0.1:9090", Query: `up{job="etcd"} == 0`}},
		{Name: "ceph", CEL: &v1alpha1.CELGate{APIVersion: "ceph.rook.io/v1", Kind: "CephCluster", Namespace: "rook-ceph", Name: "rook-ceph",
			Expression: `object.status.ceph.health == "HEALTH_OK"`}},
		{Name: "backups", BlockingPods: &v1alpha1.BlockingPodsGate{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "backup"}}}},
	}
}

// TestGatesAdmission: the CRD accepts each kind of gate and refuses, with
// the field named, what the API server can tell is wrong.
func TestGatesAdmission(t *testing.T) {
	ctx := context.Background()
	ok := validMCP("gates-accepted")
	ok.Spec.Gates = validGates()
	if err := env.Client.Create(ctx, ok); err != nil {
		t.Fatalf("pool with every kind of gate: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate
		want   []string
	}{
		{"no kind", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[0].Prometheus = nil
			return g
		}, []string{"spec.gates[0]", "exactly one of prometheus, cel and blockingPods must be set"}},
		{"two kinds", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[2].BlockingPods = g[3].BlockingPods
			return g
		}, []string{"spec.gates[2]", "exactly one of prometheus, cel and blockingPods must be set"}},
		{"alerts and a query", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[0].Prometheus.Query = "up == 0"
			return g
		}, []string{"spec.gates[0].prometheus", "exactly one of alerts and query must be set"}},
		{"neither alerts nor a query", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[1].Prometheus.Query = ""
			return g
		}, []string{"spec.gates[1].prometheus", "exactly one of alerts and query must be set"}},
		{"not an http URL", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[1].Prometheus.URL = "ftp://prometheus:9090"
			return g
		}, []string{"spec.gates[1].prometheus.url", "url must be an http or https URL"}},
		{"a CA from two places", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[0].Prometheus.CA.SecretKeyRef = g[0].Prometheus.BearerTokenSecret
			return g
		}, []string{"spec.gates[0].prometheus.ca", "exactly one of configMapKeyRef and secretKeyRef must be set"}},
		{"a name that is no DNS label", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[0].Name = "No Alerts"
			return g
		}, []string{"spec.gates[0].name"}},
		{"two gates of one name", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[1].Name = g[0].Name
			return g
		}, []string{"spec.gates[1]", "Duplicate value"}},
		{"an empty expression", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[2].CEL.Expression = ""
			return g
		}, []string{"spec.gates[2].cel.expression"}},
		// What no gate may do, refused at admission too (the controller
		// refuses it as well: internal/gate.Validate).
		{"a token to an http URL", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[0].Prometheus.URL = "http://prometheus.monitoring.svc:9090"
			return g
		}, []string{"spec.gates[0].prometheus.url", "a bearer token is sent only over https"}},
		{"a CEL gate over a Secret", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[2].CEL = &v1alpha1.CELGate{APIVersion: "v1", Kind: "Secret", Namespace: "strata-system", Name: "signing", Expression: "true"}
			return g
		}, []string{"spec.gates[2].cel.kind", "a CEL gate may not read a Secret"}},
		{"a CEL gate over a secret, in lower case", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[2].CEL.APIVersion, g[2].CEL.Kind = "v1", "secret"
			return g
		}, []string{"spec.gates[2].cel.kind", "a CEL gate may not read a Secret"}},
		{"a selector of every pod", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[3].BlockingPods.PodSelector = metav1.LabelSelector{}
			return g
		}, []string{"spec.gates[3].blockingPods.podSelector", "podSelector must not be empty"}},
		{"a selector of no labels", func(g []v1alpha1.RolloutGate) []v1alpha1.RolloutGate {
			g[3].BlockingPods.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []metav1.LabelSelectorRequirement{}}
			return g
		}, []string{"spec.gates[3].blockingPods.podSelector", "podSelector must not be empty"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := validMCP("gates-refused-" + string(rune('a'+i)))
			p.Spec.Gates = tc.mutate(validGates())
			err := env.Client.Create(ctx, p)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
