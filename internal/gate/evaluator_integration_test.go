package gate

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
	"github.com/strata-dev/strata/test/testprometheus"
)

// These tests read Secrets, ConfigMaps, objects and pods from a real
// apiserver; each uses its own namespace and names.

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		// The gate identity and the controller's RBAC, as installed.
		return e.Install(context.Background(), "config/rbac")
	})
}

const token = "s3cret-token-value"

func create(t *testing.T, objs ...ctrlclient.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func namespace(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestPrometheusCAAndToken puts a real Prometheus behind a TLS proxy that
// wants a bearer token, as kube-rbac-proxy does, and reads the CA from a
// ConfigMap or a Secret and the token from a Secret.
func TestPrometheusCAAndToken(t *testing.T) {
	ctx := context.Background()
	prom := testprometheus.Start(t, gateRules)
	prom.WaitFiring("GateTestCritical", "GateTestWarning")
	target, _ := url.Parse(prom.URL)
	proxy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"status":"error","errorType":"unauthorized","error":"who are you?"}`, http.StatusUnauthorized)
			return
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer proxy.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw}))

	ns := namespace(t, "gate-prom", nil)
	forGates := map[string]string{v1alpha1.GateCredentialsLabel: "true"}
	create(t,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prom-ca"}, Data: map[string]string{"ca.crt": caPEM, "junk": "not a certificate"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prom-ca", Labels: forGates}, Data: map[string][]byte{"ca.crt": []byte(caPEM)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prom-token", Labels: forGates}, Data: map[string][]byte{"token": []byte(token + "\n"), "wrong": []byte("not-" + token), "empty": nil}},
		// The token of another component, not labelled for gates.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-token"}, Data: map[string][]byte{"token": []byte(token)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-ca"}, Data: map[string][]byte{"ca.crt": []byte(caPEM)}},
	)
	ev := &Evaluator{Reader: env.Client, Namespace: ns, Timeout: 5 * time.Second}
	cm := func(name, key string) *v1alpha1.CABundleSource {
		return &v1alpha1.CABundleSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}
	}
	sec := func(name, key string) *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
	}
	crit := &v1alpha1.AlertFilter{NameRegexp: "GateTestCritical"}
	cases := []struct {
		name string
		gate v1alpha1.PrometheusGate
		want string // a part of the message; "" passes
	}{
		{"CA from a ConfigMap, token from a Secret: the alert holds", v1alpha1.PrometheusGate{Alerts: crit, CA: cm("prom-ca", "ca.crt"), BearerTokenSecret: sec("prom-token", "token")},
			`firing: GateTestCritical{severity="critical", team="storage"}`},
		{"CA from a Secret: an empty query passes", v1alpha1.PrometheusGate{Query: "vector(1) > 2",
			CA: &v1alpha1.CABundleSource{SecretKeyRef: sec("prom-ca", "ca.crt")}, BearerTokenSecret: sec("prom-token", "token")}, ""},
		{"no CA: the certificate is not trusted", v1alpha1.PrometheusGate{Alerts: crit, BearerTokenSecret: sec("prom-token", "token")},
			"certificate signed by unknown authority"},
		{"a CA key without a certificate", v1alpha1.PrometheusGate{Alerts: crit, CA: cm("prom-ca", "junk")},
			"ca: key junk of ConfigMap gate-prom/prom-ca holds no PEM certificate"},
		{"a missing ConfigMap", v1alpha1.PrometheusGate{Alerts: crit, CA: cm("nope", "ca.crt")},
			"ca: key ca.crt of ConfigMap gate-prom/nope: not found"},
		// The server's words are not shown, only the status and its
		// errorType.
		{"a wrong token", v1alpha1.PrometheusGate{Alerts: crit, CA: cm("prom-ca", "ca.crt"), BearerTokenSecret: sec("prom-token", "wrong")},
			"answered 401 Unauthorized: unauthorized"},
		{"a token Secret not labelled for gates", v1alpha1.PrometheusGate{Alerts: crit, CA: cm("prom-ca", "ca.crt"), BearerTokenSecret: sec("other-token", "token")},
			"bearerTokenSecret: key token of Secret gate-prom/other-token: no Secret of that name is labelled machineconfiguration.strata.dev/gate-credentials=true"},
		{"a missing token Secret reads the same", v1alpha1.PrometheusGate{Alerts: crit, CA: cm("prom-ca", "ca.crt"), BearerTokenSecret: sec("nope", "token")},
			"bearerTokenSecret: key token of Secret gate-prom/nope: no Secret of that name is labelled machineconfiguration.strata.dev/gate-credentials=true"},
		{"a CA Secret not labelled for gates", v1alpha1.PrometheusGate{Alerts: crit, CA: &v1alpha1.CABundleSource{SecretKeyRef: sec("other-ca", "ca.crt")}},
			"ca: key ca.crt of Secret gate-prom/other-ca: no Secret of that name is labelled"},
		{"no token", v1alpha1.PrometheusGate{Alerts: crit, CA: cm("prom-ca", "ca.crt")}, "401 Unauthorized"},
		{"an empty token", v1alpha1.PrometheusGate{Alerts: crit, CA: cm("prom-ca", "ca.crt"), BearerTokenSecret: sec("prom-token", "empty")},
			"bearerTokenSecret: key empty of Secret gate-prom/prom-token is empty"},
		{"a missing key", v1alpha1.PrometheusGate{Alerts: crit, CA: cm("prom-ca", "ca.crt"), BearerTokenSecret: sec("prom-token", "tokn")},
			"bearerTokenSecret: key tokn of Secret gate-prom/prom-token: no such key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.gate.URL = proxy.URL
			vs := ev.Pool(ctx, []v1alpha1.RolloutGate{{Name: "alerts", Prometheus: &tc.gate}})
			if len(vs) != 1 {
				t.Fatalf("verdicts %+v", vs)
			}
			v := vs[0]
			if tc.want == "" {
				if !v.Pass || v.Message != "" {
					t.Errorf("verdict %+v, want a pass", v)
				}
				return
			}
			if v.Pass || !strings.Contains(v.Message, tc.want) {
				t.Errorf("verdict %+v, want a hold saying %q", v, tc.want)
			}
			if strings.Contains(v.String(), token) || strings.Contains(v.Detail, token) {
				t.Errorf("the verdict shows the token: %+v", v)
			}
			if strings.Contains(v.Message, "who are you") {
				t.Errorf("the verdict quotes the server: %s", v)
			}
		})
	}
}

// TestCELGate reads a real custom resource (a MachineConfigPool stands
// for any CR: a storage cluster's, say) and a core object.
func TestCELGate(t *testing.T) {
	ctx := context.Background()
	pool := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "cel-target", Labels: map[string]string{"health": "HEALTH_OK"}}}
	create(t, pool)
	pool.Status.MachineCount = 3
	if err := env.Client.Status().Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, "gate-cel", nil)
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flags"}, Data: map[string]string{"updates": "allowed"}})
	ev := &Evaluator{Reader: env.Client, Namespace: ns}
	mcp := func(expr string) *v1alpha1.CELGate {
		return &v1alpha1.CELGate{APIVersion: "machineconfiguration.strata.dev/v1alpha1", Kind: "MachineConfigPool", Name: "cel-target", Expression: expr}
	}
	cases := []struct {
		name string
		gate *v1alpha1.CELGate
		want string // "" passes; else the whole message
	}{
		{"true passes", mcp(`object.metadata.labels.health == "HEALTH_OK" && object.status.machineCount == 3`), ""},
		{"false holds", mcp(`object.status.machineCount > 3`),
			"object.status.machineCount > 3 is false for MachineConfigPool cel-target (machineconfiguration.strata.dev/v1alpha1)"},
		{"a missing field holds", mcp(`object.status.health == "HEALTH_OK"`),
			"could not be evaluated over MachineConfigPool cel-target (machineconfiguration.strata.dev/v1alpha1): evaluation error: a key is missing (guard it with has() or in)"},
		// The error would quote the label's value: only its kind is told.
		{"an error over a value does not show it", mcp(`{}[object.metadata.labels.health] == ""`),
			"could not be evaluated over MachineConfigPool cel-target (machineconfiguration.strata.dev/v1alpha1): evaluation error: a key is missing"},
		{"has() guards a missing field", mcp(`!has(object.status.health) || object.status.health == "HEALTH_OK"`), ""},
		{"not a bool at run time holds", mcp(`object.metadata.labels.health`),
			"the expression over MachineConfigPool cel-target (machineconfiguration.strata.dev/v1alpha1) returned string, not a bool"},
		{"a missing object holds", &v1alpha1.CELGate{APIVersion: "machineconfiguration.strata.dev/v1alpha1", Kind: "MachineConfigPool", Name: "nope", Expression: "true"},
			"could not be evaluated: cannot get MachineConfigPool nope (machineconfiguration.strata.dev/v1alpha1): not found"},
		{"an unknown kind holds", &v1alpha1.CELGate{APIVersion: "ceph.rook.io/v1", Kind: "CephCluster", Namespace: "rook-ceph", Name: "rook-ceph", Expression: "true"},
			`could not be evaluated: cannot get CephCluster rook-ceph/rook-ceph (ceph.rook.io/v1): no such kind is served`},
		{"a namespaced core object", &v1alpha1.CELGate{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "flags", Expression: `object.data.updates == "allowed"`}, ""},
		{"a compile error holds", mcp(`object.status.machineCount >`), "the expression does not compile: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := ev.Pool(ctx, []v1alpha1.RolloutGate{{Name: "health", CEL: tc.gate}})[0]
			if v.Kind != KindCEL || v.Gate != "health" {
				t.Errorf("verdict %+v", v)
			}
			switch {
			case tc.want == "" && (!v.Pass || v.Message != ""):
				t.Errorf("verdict %+v, want a pass", v)
			case tc.want != "" && (v.Pass || !strings.HasPrefix(v.Message, tc.want)):
				t.Errorf("message %q, want %q", v.Message, tc.want)
			}
			if strings.Contains(v.Message+v.Detail, "HEALTH_OK") && !strings.Contains(tc.gate.Expression, "HEALTH_OK") {
				t.Errorf("the verdict shows the object's data: %+v", v)
			}
		})
	}
}

// TestBlockingPods: pods bound to nodes, in namespaces with and without
// the label, running or finished.
func TestBlockingPods(t *testing.T) {
	ctx := context.Background()
	prod := namespace(t, "gate-pods-prod", map[string]string{"tier": "prod"})
	dev := namespace(t, "gate-pods-dev", map[string]string{"tier": "dev"})
	pod := func(ns, name, node string, labels map[string]string, phase corev1.PodPhase) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		create(t, p)
		if phase != "" {
			p.Status.Phase = phase
			if err := env.Client.Status().Update(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	backup := map[string]string{"app": "backup"}
	pod(prod, "backup-1", "bp-n1", backup, corev1.PodRunning)
	pod(prod, "backup-0", "bp-n1", backup, corev1.PodRunning) // the first by name is named
	pod(dev, "backup-2", "bp-n2", backup, corev1.PodRunning)
	pod(prod, "backup-3", "bp-n3", backup, corev1.PodSucceeded)
	pod(prod, "web", "bp-n4", map[string]string{"app": "web"}, corev1.PodRunning)
	pod(prod, "backup-4", "bp-n5", backup, "") // pending, bound: it will run
	nodes := []string{"bp-n1", "bp-n2", "bp-n3", "bp-n4", "bp-n5"}
	ev := &Evaluator{Reader: env.Client, Namespace: prod}

	sel := metav1.LabelSelector{MatchLabels: backup}
	got := func(g *v1alpha1.BlockingPodsGate) map[string]string {
		blocked, failed := ev.Nodes(ctx, []v1alpha1.RolloutGate{{Name: "backups", BlockingPods: g}}, nodes)
		if len(failed) > 0 {
			t.Fatalf("failed: %+v", failed)
		}
		out := map[string]string{}
		for n, v := range blocked {
			out[n] = v.String()
		}
		return out
	}
	say := func(pod string) string { return `gate "backups" (blockingPods): pod ` + pod + " runs on it" }
	check := func(name string, got, want map[string]string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: blocked %v, want %v", name, got, want)
			return
		}
		for n, w := range want {
			if got[n] != w {
				t.Errorf("%s: node %s: %q, want %q", name, n, got[n], w)
			}
		}
	}
	check("every namespace", got(&v1alpha1.BlockingPodsGate{PodSelector: sel}), map[string]string{
		"bp-n1": say(prod + "/backup-0"), "bp-n2": say(dev + "/backup-2"), "bp-n5": say(prod + "/backup-4"),
	})
	check("prod namespaces", got(&v1alpha1.BlockingPodsGate{PodSelector: sel, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}}),
		map[string]string{"bp-n1": say(prod + "/backup-0"), "bp-n5": say(prod + "/backup-4")})
	check("no match", got(&v1alpha1.BlockingPodsGate{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}), map[string]string{})
}

func TestValidate(t *testing.T) {
	gates := []v1alpha1.RolloutGate{
		{Name: "ok", Prometheus: &v1alpha1.PrometheusGate{URL: "http://p", Alerts: &v1alpha1.AlertFilter{NameRegexp: "Node.*", IgnoreNameRegexp: "Watchdog"}}},
		{Name: "bad-re", Prometheus: &v1alpha1.PrometheusGate{URL: "http://p", Alerts: &v1alpha1.AlertFilter{NameRegexp: "Node(", IgnoreNameRegexp: "[z-a]"}}},
		{Name: "bad-cel", CEL: &v1alpha1.CELGate{APIVersion: "a/b/c", Kind: "K", Name: "n", Expression: "object.status.health =="}},
		{Name: "int-cel", CEL: &v1alpha1.CELGate{APIVersion: "v1", Kind: "K", Name: "n", Expression: "1 + 2"}},
		{Name: "bad-sel", BlockingPods: &v1alpha1.BlockingPodsGate{PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Is"}}}}},
		{Name: "secret", CEL: &v1alpha1.CELGate{APIVersion: "v1", Kind: "Secret", Namespace: "strata-system", Name: "signing", Expression: "true"}},
		{Name: "all-pods", BlockingPods: &v1alpha1.BlockingPodsGate{PodSelector: metav1.LabelSelector{}}},
		{Name: "token-http", Prometheus: &v1alpha1.PrometheusGate{URL: "http://p", Query: "up == 0",
			BearerTokenSecret: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "t"}, Key: "token"}}},
		{Name: "token-https", Prometheus: &v1alpha1.PrometheusGate{URL: "https://p", Query: "up == 0",
			BearerTokenSecret: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "t"}, Key: "token"}}},
		// A Secret is refused however its kind is spelled; another
		// group's Secret kind is not the core one.
		{Name: "secret-lower", CEL: &v1alpha1.CELGate{APIVersion: "v1", Kind: "secret", Name: "s", Expression: "true"}},
		{Name: "other-secret", CEL: &v1alpha1.CELGate{APIVersion: "vault.example.com/v1", Kind: "Secret", Name: "s", Expression: "true"}},
	}
	errs := Validate(gates)
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field)
	}
	want := []string{
		"spec.gates[1].prometheus.alerts.nameRegexp", "spec.gates[1].prometheus.alerts.ignoreNameRegexp",
		"spec.gates[2].cel.apiVersion", "spec.gates[2].cel.expression", "spec.gates[3].cel.expression",
		"spec.gates[4].blockingPods.podSelector",
		"spec.gates[5].cel.kind", "spec.gates[6].blockingPods.podSelector", "spec.gates[7].prometheus.url",
		"spec.gates[9].cel.kind",
	}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Errorf("fields %v, want %v\n%v", fields, want, errs)
	}
	if !strings.Contains(errs[4].Error(), "the expression is of type int, want bool") {
		t.Errorf("error %v", errs[4])
	}
	for i, want := range map[int]string{
		6: "spec.gates[5].cel.kind: Forbidden: a CEL gate may not read a Secret",
		7: "spec.gates[6].blockingPods.podSelector: Required value: podSelector is empty and would select every pod of the cluster",
		8: `spec.gates[7].prometheus.url: Invalid value: "http://p": bearerTokenSecret is set but url is not https`,
	} {
		if !strings.HasPrefix(errs[i].Error(), want) {
			t.Errorf("error %d: %v, want %q", i, errs[i], want)
		}
	}
}
