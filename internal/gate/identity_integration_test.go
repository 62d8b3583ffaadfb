package gate

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// installNamespace is where config/rbac puts the gate identity.
const installNamespace = "strata-system"

// secretValue is what a strata-system Secret holds in these tests: a
// gate's message, detail or request must never carry it.
const secretValue = "signing-key-passphrase-0d41"

// gateReader is the reader strata-controller gives the gates: the
// gate identity, with the RBAC config/rbac installs.
func gateReader(t *testing.T) ctrlclient.Reader {
	t.Helper()
	r, err := NewReader(env.Config, ctrlclient.Options{Scheme: env.Scheme}, installNamespace)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGateIdentityReadsNoSecret: a CEL gate over a Secret of
// strata-system is refused before anything is read, and the gate
// identity could not read it anyway; what a CEL gate may read is only
// what an admin granted it, and its evaluation errors never quote the
// object.
func TestGateIdentityReadsNoSecret(t *testing.T) {
	ctx := context.Background()
	create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: "gate-test-signing"},
			Data: map[string][]byte{"passphrase": []byte(secretValue)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: "gate-test-flags"},
			Data: map[string]string{"key": secretValue}},
	)
	r := gateReader(t)
	ev := &Evaluator{Reader: r, Credentials: env.Client, Namespace: installNamespace}

	// The attack: an error that quotes the value it failed on.
	leak := `{}[object.data['passphrase']] == ''`
	secretGate := []v1alpha1.RolloutGate{{Name: "leak", CEL: &v1alpha1.CELGate{
		APIVersion: "v1", Kind: "Secret", Namespace: installNamespace, Name: "gate-test-signing", Expression: leak}}}
	errs := Validate(secretGate)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.gates[0].cel.kind: Forbidden: a CEL gate may not read a Secret") {
		t.Errorf("Validate: %v, want the Secret kind refused", errs)
	}
	v := ev.Pool(ctx, secretGate)[0]
	if v.Pass || v.String() != `gate "leak" (cel): a CEL gate may not read a Secret` {
		t.Errorf("verdict %+v, want the Secret refused", v)
	}
	// And the identity itself has no Secret: not even get by name.
	var s corev1.Secret
	if err := r.Get(ctx, ctrlclient.ObjectKey{Namespace: installNamespace, Name: "gate-test-signing"}, &s); !apierrors.IsForbidden(err) {
		t.Errorf("the gate identity got the Secret: %v", err)
	}

	// A ConfigMap it was not granted: forbidden, and said so by kind.
	cmGate := func(expr string) []v1alpha1.RolloutGate {
		return []v1alpha1.RolloutGate{{Name: "flags", CEL: &v1alpha1.CELGate{
			APIVersion: "v1", Kind: "ConfigMap", Namespace: installNamespace, Name: "gate-test-flags", Expression: expr}}}
	}
	v = ev.Pool(ctx, cmGate(`{}[object.data.key] == ''`))[0]
	if v.Pass || !strings.HasPrefix(v.Message, "could not be evaluated: cannot get ConfigMap strata-system/gate-test-flags (v1): forbidden") {
		t.Errorf("verdict %+v, want forbidden", v)
	}
	noValue(t, v)

	// The admin grants ConfigMaps in strata-system (in a cluster, a
	// ClusterRole labelled to aggregate into strata-gate-reader; envtest
	// runs no aggregation controller, so the test binds its own).
	grantGates(t, "gate-test-configmaps", installNamespace, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}})
	waitFor(t, "the grant to take", func() bool {
		return !strings.Contains(ev.Pool(ctx, cmGate("true"))[0].Message, "forbidden")
	})
	if v := ev.Pool(ctx, cmGate(`object.data.key != ""`))[0]; !v.Pass {
		t.Errorf("verdict %+v, want a pass once granted", v)
	}
	v = ev.Pool(ctx, cmGate(`{}[object.data.key] == ''`))[0]
	if v.Pass || v.String() != `gate "flags" (cel): could not be evaluated over ConfigMap strata-system/gate-test-flags (v1): evaluation error: a key is missing (guard it with has() or in)` {
		t.Errorf("verdict %+v, want the kind of error only", v)
	}
	noValue(t, v)
	for _, expr := range []string{`int(object.data.key) > 0`, `object.data.key.matches('[')`, `object.data.key + 1 == 2`, `[1][int(size(object.data.key))] == 1`} {
		noValue(t, ev.Pool(ctx, cmGate(expr))[0])
	}
	// Granted ConfigMaps do not grant Secrets.
	if err := r.Get(ctx, ctrlclient.ObjectKey{Namespace: installNamespace, Name: "gate-test-signing"}, &s); !apierrors.IsForbidden(err) {
		t.Errorf("the gate identity got the Secret: %v", err)
	}
}

// noValue fails when a verdict carries the Secret's or ConfigMap's value.
func noValue(t *testing.T, v Verdict) {
	t.Helper()
	if strings.Contains(v.Message, secretValue) || strings.Contains(v.Detail, secretValue) {
		t.Errorf("the verdict shows the object's data: %+v", v)
	}
}

// grantGates binds the gate identity to rule in namespace.
func grantGates(t *testing.T, name, namespace string, rule rbacv1.PolicyRule) {
	t.Helper()
	create(t,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: []rbacv1.PolicyRule{rule}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: installNamespace, Name: ServiceAccount}}},
	)
}

// waitFor polls cond until it holds, for RBAC to reach the authorizer's
// cache.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronisation
	}
}

// TestGateIdentityListsBlockingPods: blockingPods gates work with the
// identity as installed, with no grant.
func TestGateIdentityListsBlockingPods(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "gate-id-pods", map[string]string{"tier": "batch"})
	create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup", Labels: map[string]string{"app": "id-backup"}},
		Spec: corev1.PodSpec{NodeName: "id-n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})
	ev := &Evaluator{Reader: gateReader(t), Namespace: installNamespace}
	gates := []v1alpha1.RolloutGate{{Name: "backups", BlockingPods: &v1alpha1.BlockingPodsGate{
		PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "id-backup"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "batch"}},
	}}}
	blocked, failed := ev.Nodes(ctx, gates, []string{"id-n1", "id-n2"})
	if len(failed) > 0 || len(blocked) != 1 || blocked["id-n1"].Message != "pod gate-id-pods/backup runs on it" {
		t.Errorf("blocked %+v, failed %+v; want id-n1 blocked by the backup pod", blocked, failed)
	}
	// An empty selector is refused, not run.
	gates[0].BlockingPods.PodSelector = metav1.LabelSelector{}
	blocked, failed = ev.Nodes(ctx, gates, []string{"id-n1", "id-n2"})
	if len(failed) != 1 || !strings.Contains(failed[0].Message, "podSelector is empty and would select every pod") || len(blocked) != 2 {
		t.Errorf("blocked %+v, failed %+v; want every node held by the refused gate", blocked, failed)
	}
}

// TestControllerImpersonatesOnlyTheGateIdentity: the controller's RBAC
// lets it impersonate strata-gates and nothing else.
func TestControllerImpersonatesOnlyTheGateIdentity(t *testing.T) {
	ctx := context.Background()
	controller := "system:serviceaccount:strata-system:strata-controller"
	may := func(attr authorizationv1.ResourceAttributes) bool {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: controller, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:strata-system", "system:authenticated"},
			ResourceAttributes: &attr,
		}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	sa := func(ns, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: ns, Name: name}
	}
	if !may(sa(installNamespace, ServiceAccount)) {
		t.Error("the controller may not impersonate the gate identity")
	}
	for _, attr := range []authorizationv1.ResourceAttributes{
		sa(installNamespace, "strata-controller"), sa(installNamespace, "default"), sa("kube-system", ServiceAccount),
		sa(installNamespace, ""),
		{Verb: "impersonate", Resource: "users", Name: "admin"},
		{Verb: "impersonate", Resource: "groups", Name: "system:masters"},
		{Verb: "get", Resource: "secrets", Namespace: "kube-system"},
	} {
		if may(attr) {
			t.Errorf("the controller may %s %s %s/%s", attr.Verb, attr.Resource, attr.Namespace, attr.Name)
		}
	}
}

// TestTokenOnlyOverHTTPS: a gate with a token and an http URL is refused
// before any request, so the token never crosses the network in the
// clear.
func TestTokenOnlyOverHTTPS(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	}))
	defer srv.Close()
	ns := namespace(t, "gate-https", nil)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prom-token", Labels: map[string]string{v1alpha1.GateCredentialsLabel: "true"}},
		Data: map[string][]byte{"token": []byte(token)}})
	ev := &Evaluator{Reader: env.Client, Namespace: ns}
	g := []v1alpha1.RolloutGate{{Name: "query", Prometheus: &v1alpha1.PrometheusGate{URL: srv.URL, Query: "up == 0",
		BearerTokenSecret: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "prom-token"}, Key: "token"}}}}
	v := ev.Pool(ctx, g)[0]
	if v.Pass || v.Message != "could not be evaluated: bearerTokenSecret is set but url is not https: a token is sent only over https" {
		t.Errorf("verdict %+v, want the http URL refused", v)
	}
	// Without the token, the same server is asked.
	g[0].Prometheus.BearerTokenSecret = nil
	if v := ev.Pool(ctx, g)[0]; !v.Pass {
		t.Errorf("verdict %+v, want a pass", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 1 || auth[0] != "" {
		t.Errorf("the server saw Authorization headers %q, want one request without", auth)
	}
}

// TestCheckBudget: however many slow gates a pool has, Check returns
// within its budget, each unfinished gate holding as timed out.
func TestCheckBudget(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer slow.Close()
	defer close(release)
	ev := &Evaluator{Reader: env.Client, Namespace: "default", Timeout: time.Minute, Budget: time.Second}
	var gates []v1alpha1.RolloutGate
	for _, name := range []string{"a", "b", "c"} {
		gates = append(gates, v1alpha1.RolloutGate{Name: name, Prometheus: &v1alpha1.PrometheusGate{URL: slow.URL, Query: "up == 0"}})
	}
	start := time.Now()
	res := ev.Check(context.Background(), gates, nil)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Check took %s, want about its budget of 1s", d)
	}
	if len(res.Pool) != 3 {
		t.Fatalf("verdicts %+v", res.Pool)
	}
	for _, v := range res.Pool {
		if v.Pass || !strings.HasSuffix(v.Message, ": timed out") {
			t.Errorf("verdict %+v, want timed out", v)
		}
	}
}
