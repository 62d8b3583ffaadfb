package node

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/gate"
	"github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/test/testenv"
	"github.com/strata-dev/strata/test/testprometheus"
)

// gateRecheck is the tests' re-check interval: short, so that a gate's
// clearing is seen within the tests' deadlines.
const gateRecheck = time.Second

// startGatedController runs the rollout reconciler with gates read
// uncached as the gate identity, and their credentials by the controller,
// as strata-controller does, re-checked every gateRecheck.
func startGatedController(t *testing.T) {
	t.Helper()
	startGatedControllerWith(t, &gate.Evaluator{Timeout: 5 * time.Second})
}

// startGatedControllerWith is startGatedController with ev's timeouts.
func startGatedControllerWith(t *testing.T, ev *gate.Evaluator) {
	t.Helper()
	reader, err := gate.NewReader(env.Config, client.Options{Scheme: env.Scheme}, installNamespace)
	must(t, err)
	env.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: CacheByObject()}, Logger: testenv.NewLogs(0).Logger()}, func(mgr ctrl.Manager) error {
		ev.Reader, ev.Credentials, ev.Namespace = reader, mgr.GetAPIReader(), installNamespace
		return (&Reconciler{
			Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("strata-rollout"),
			Gates:       ev,
			GateRecheck: gateRecheck,
		}).SetupWithManager(mgr)
	})
}

// installNamespace is where config/rbac puts the gate identity.
const installNamespace = "strata-system"

// grantGates gives the gate identity rule, cluster-wide, as an admin's
// ClusterRole labelled to aggregate into strata-gate-reader does (envtest
// runs no aggregation controller: the test binds its own), and waits
// until the authorizer knows it.
func grantGates(t *testing.T, name string, rule rbacv1.PolicyRule, probe authorizationv1.ResourceAttributes) {
	t.Helper()
	ctx := context.Background()
	must(t, env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}))
	must(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: installNamespace, Name: gate.ServiceAccount}}}))
	eventually(t, "the gate identity's grant "+name, func() error {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: gate.Username(installNamespace), ResourceAttributes: &probe}}
		if err := env.Client.Create(ctx, sar); err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("not allowed: %s", sar.Status.Reason)
		}
		return nil
	})
}

// assertNothingShows fails when the pool's conditions or Events carry
// value.
func (f *fixture) assertNothingShows(value string) {
	f.t.Helper()
	for _, c := range f.poolObj().Status.Conditions {
		if strings.Contains(c.Message, value) {
			f.t.Errorf("condition %s shows the object's data: %s", c.Type, c.Message)
		}
	}
	var events eventsv1.EventList
	must(f.t, env.Client.List(context.Background(), &events))
	for _, e := range events.Items {
		if e.Regarding.Name == f.pool && strings.Contains(e.Note, value) {
			f.t.Errorf("Event %s shows the object's data: %s", e.Reason, e.Note)
		}
	}
}

// assertNoneTaken checks, after a condition that the same reconcile
// wrote after the nodes, that no node was sent the target.
func (f *fixture) assertNoneTaken(config, img, why string) {
	f.t.Helper()
	if got := f.taken(config, img); len(got) != 0 {
		f.t.Fatalf("nodes %v were taken while %s", got, why)
	}
}

// TestPrometheusGateHoldsUntilTheAlertClears: a real Prometheus fires an
// alert; the pool holds, naming it; the rule goes, and the rollout goes on.
func TestPrometheusGateHoldsUntilTheAlertClears(t *testing.T) {
	prom := testprometheus.Start(t, testprometheus.Rules(
		testprometheus.Rule{Alert: "CephHealthError", Expr: "vector(1)", Labels: map[string]string{"severity": "critical"}},
		testprometheus.Rule{Alert: "Watchdog", Expr: "vector(1)"},
	))
	prom.WaitFiring("CephHealthError", "Watchdog")
	f := newFixture(t, "pg", 2, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.Gates = []v1alpha1.RolloutGate{{Name: "alerts", Prometheus: &v1alpha1.PrometheusGate{
			URL: prom.URL, Alerts: &v1alpha1.AlertFilter{IgnoreNameRegexp: "Watchdog", Labels: map[string]string{"severity": "critical"}},
		}}}
	})
	f.layer("rendered-pg-1", image('a'))
	startGatedController(t)

	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonHeldByGate,
		`Held by gate "alerts" (prometheus): firing: CephHealthError{severity="critical"}; 0 of 2 nodes run rendered-pg-1`)
	f.waitCondition(v1alpha1.PoolUpdating, "False", v1alpha1.ReasonHeldByGate, "CephHealthError")
	f.waitPoolEvent(corev1.EventTypeNormal, v1alpha1.ReasonHeldByGate, "CephHealthError")
	f.assertNoneTaken("rendered-pg-1", image('a'), "an alert fired")
	gateHeld := func() float64 { return testutil.ToFloat64(metrics.PoolGateHeld.WithLabelValues(f.pool, "alerts")) }
	waitMetric(t, `strata_pool_gate_held{gate="alerts"}`, gateHeld, 1)

	prom.SetRules(testprometheus.Rules(testprometheus.Rule{Alert: "Watchdog", Expr: "vector(1)"}))
	prom.WaitFiring("Watchdog")
	f.waitTaken("rendered-pg-1", image('a'), 1)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonRollingOut, "0 of 2 nodes run")
	waitMetric(t, `strata_pool_gate_held{gate="alerts"}`, gateHeld, 0)
}

// TestCELGateOverACustomResource holds the rollout on a field of a real
// custom resource, refuses an expression that does not compile naming
// its field, and releases when the object says healthy.
func TestCELGateOverACustomResource(t *testing.T) {
	ctx := context.Background()
	// A MachineConfigPool stands for any custom resource (a storage
	// cluster's): the gate reads it as unstructured, by apiVersion/kind.
	health := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "cg-health", Labels: map[string]string{"health": "HEALTH_WARN"}}}
	must(t, env.Client.Create(ctx, health))
	grantGates(t, "strata-gate-reader-test-pools",
		rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"machineconfigpools"}, Verbs: []string{"get"}},
		authorizationv1.ResourceAttributes{Verb: "get", Group: v1alpha1.GroupVersion.Group, Resource: "machineconfigpools", Name: "cg-health"})
	celGate := func(expr string) []v1alpha1.RolloutGate {
		return []v1alpha1.RolloutGate{{Name: "storage", CEL: &v1alpha1.CELGate{
			APIVersion: "machineconfiguration.strata.dev/v1alpha1", Kind: "MachineConfigPool", Name: "cg-health", Expression: expr,
		}}}
	}
	f := newFixture(t, "cg", 2, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.Gates = celGate(`object.metadata.labels.health ==`)
	})
	f.layer("rendered-cg-1", image('a'))
	startGatedController(t)

	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonInvalidGate,
		`No node is taken until the gates are fixed: spec.gates[0].cel.expression: Invalid value: "object.metadata.labels.health ==": ERROR`)
	f.waitPoolEvent(corev1.EventTypeWarning, v1alpha1.ReasonInvalidGate, "spec.gates[0].cel.expression")
	f.assertNoneTaken("rendered-cg-1", image('a'), "the gate did not compile")

	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := f.poolObj()
		p.Spec.Gates = celGate(`object.metadata.labels.health == "HEALTH_OK"`)
		return env.Client.Update(ctx, p)
	}))
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonHeldByGate,
		`Held by gate "storage" (cel): object.metadata.labels.health == "HEALTH_OK" is false for MachineConfigPool cg-health (machineconfiguration.strata.dev/v1alpha1)`)
	f.assertNoneTaken("rendered-cg-1", image('a'), "the object was not healthy")

	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(health), health); err != nil {
			return err
		}
		health.Labels["health"] = "HEALTH_OK"
		return env.Client.Update(ctx, health)
	}))
	f.waitTaken("rendered-cg-1", image('a'), 1)
}

// TestBlockingPodKeepsItsNodeOnly: a node running a matching pod is
// passed over, the next node is taken in its place; once the pod is gone
// the node is taken too.
func TestBlockingPodKeepsItsNodeOnly(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bg-jobs", Labels: map[string]string{"backups": "true"}}}
	must(t, env.Client.Create(ctx, ns))
	f := newFixture(t, "bg", 2, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.MaxUnavailable = ptrIntOrString(intstr.FromInt32(1))
		p.Spec.Gates = []v1alpha1.RolloutGate{{Name: "backups", BlockingPods: &v1alpha1.BlockingPodsGate{
			PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "backup"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"backups": "true"}},
		}}}
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "backup", Labels: map[string]string{"app": "backup"}},
		Spec: corev1.PodSpec{NodeName: "bg-0", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	must(t, env.Client.Create(ctx, pod))
	// The same pod elsewhere does not block: another namespace.
	other := pod.DeepCopy()
	other.Namespace, other.Spec.NodeName, other.ResourceVersion, other.UID = "default", "bg-1", "", ""
	must(t, env.Client.Create(ctx, other))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, other) })
	f.layer("rendered-bg-1", image('a'))
	startGatedController(t)

	// bg-0 comes first by name, but its backup runs: bg-1 goes instead.
	if got := f.waitTaken("rendered-bg-1", image('a'), 1); got[0] != "bg-1" {
		t.Fatalf("taken %v, want bg-1", got)
	}
	// Gates are checked when a node is to be taken: with bg-1 in flight
	// and maxUnavailable 1, none is; once it is done, bg-0 is held.
	f.finish("bg-1")
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonHeldByGate,
		`Every node to be taken is held by a gate: node bg-0 by gate "backups" (blockingPods): pod bg-jobs/backup runs on it; 1 of 2 nodes run`)
	if got := f.taken("rendered-bg-1", image('a')); len(got) != 1 {
		t.Fatalf("taken %v while bg-0's backup runs", got)
	}

	// No kubelet here: deleted at once, as a kubelet would once it stops.
	must(t, env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	f.waitTaken("rendered-bg-1", image('a'), 2)
}

// secretValue is what the objects these tests point gates at hold: the
// pool's status and Events must never carry it.
const secretValue = "passphrase-of-the-signing-key-5c1e"

// TestCELGateOverASecretIsRefused: the review's attack, an expression
// whose error quotes the value it failed on, over a Secret of
// strata-system. The API server refuses it as written; spelt so that the
// CRD's rule misses it (apiVersion "/v1" is the core group too), the
// controller refuses it: the gate is invalid, no node is taken, and
// nothing of the Secret reaches the pool's status or Events.
func TestCELGateOverASecretIsRefused(t *testing.T) {
	ctx := context.Background()
	must(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: "cs-signing"},
		Data: map[string][]byte{"passphrase": []byte(secretValue)}}))
	leak := func(apiVersion string) []v1alpha1.RolloutGate {
		return []v1alpha1.RolloutGate{{Name: "leak", CEL: &v1alpha1.CELGate{
			APIVersion: apiVersion, Kind: "Secret", Namespace: installNamespace, Name: "cs-signing",
			Expression: `{}[object.data['passphrase']] == ''`,
		}}}
	}
	refused := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "cs-refused"}, Spec: v1alpha1.MachineConfigPoolSpec{Gates: leak("v1")}}
	if err := env.Client.Create(ctx, refused); err == nil || !strings.Contains(err.Error(), "spec.gates[0].cel.kind: Invalid value: a CEL gate may not read a Secret") {
		t.Errorf("the API server answered %v, want the Secret gate refused", err)
	}
	f := newFixture(t, "cs", 2, func(p *v1alpha1.MachineConfigPool) { p.Spec.Gates = leak("/v1") })
	f.layer("rendered-cs-1", image('a'))
	startGatedController(t)

	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonInvalidGate,
		"No node is taken until the gates are fixed: spec.gates[0].cel.kind: Forbidden: a CEL gate may not read a Secret")
	f.waitPoolEvent(corev1.EventTypeWarning, v1alpha1.ReasonInvalidGate, "a CEL gate may not read a Secret")
	f.assertNoneTaken("rendered-cs-1", image('a'), "the gate read a Secret")
	f.assertNothingShows(secretValue)
	f.assertNothingShows("cGFzc3BocmFzZS1vZi10aGUtc2lnbmluZy1rZXktNWMxZQ") // base64, as object.data holds it
}

// TestCELGateErrorShowsNoValue: over an object the gate identity may
// read, an expression that fails on a value holds the pool, and the
// condition and Event say which gate failed and the kind of error only.
func TestCELGateErrorShowsNoValue(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cv-flags"}}
	must(t, env.Client.Create(ctx, ns))
	must(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "flags"},
		Data: map[string]string{"key": secretValue}}))
	grantGates(t, "strata-gate-reader-test-configmaps",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
		authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: ns.Name, Name: "flags"})
	f := newFixture(t, "cv", 2, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.Gates = []v1alpha1.RolloutGate{{Name: "flags", CEL: &v1alpha1.CELGate{
			APIVersion: "v1", Kind: "ConfigMap", Namespace: ns.Name, Name: "flags",
			Expression: `{}[object.data['key']] == ''`,
		}}}
	})
	f.layer("rendered-cv-1", image('a'))
	startGatedController(t)

	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonHeldByGate,
		`Held by gate "flags" (cel): could not be evaluated over ConfigMap cv-flags/flags (v1): evaluation error: a key is missing (guard it with has() or in); 0 of 2 nodes run rendered-cv-1`)
	f.waitPoolEvent(corev1.EventTypeNormal, v1alpha1.ReasonHeldByGate, `gate "flags" (cel): could not be evaluated`)
	f.assertNoneTaken("rendered-cv-1", image('a'), "the gate failed")
	f.assertNothingShows(secretValue)
}

// TestCELGateOverAnUngrantedKindIsForbidden: without an admin's grant the
// gate identity reads nothing, and the pool says so.
func TestCELGateOverAnUngrantedKindIsForbidden(t *testing.T) {
	f := newFixture(t, "cf", 1, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.Gates = []v1alpha1.RolloutGate{{Name: "nodes", CEL: &v1alpha1.CELGate{
			APIVersion: "v1", Kind: "ServiceAccount", Namespace: installNamespace, Name: "strata-gates", Expression: `true`,
		}}}
	})
	f.layer("rendered-cf-1", image('a'))
	startGatedController(t)
	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonHeldByGate,
		`Held by gate "nodes" (cel): could not be evaluated: cannot get ServiceAccount strata-system/strata-gates (v1): forbidden (the gate identity may get only the kinds an admin grants it: see Gates in the README)`)
	f.assertNoneTaken("rendered-cf-1", image('a'), "the gate was forbidden")
}

// TestSlowGateHoldsOnlyItsPool: a Prometheus that never answers holds its
// pool as timed out once the gates' budget is spent, and another pool
// goes on meanwhile: its node is taken while the slow gate's first
// request is still waiting.
func TestSlowGateHoldsOnlyItsPool(t *testing.T) {
	var (
		mu        sync.Mutex
		started   = make(chan struct{}, 100)
		firstDone bool
	)
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done() // until the gate gives up
		mu.Lock()
		firstDone = true
		mu.Unlock()
	}))
	// Closed after the manager stops (cleanups run last first), which
	// cancels the request still waiting.
	t.Cleanup(slow.Close)
	slowPool := newFixture(t, "ss", 1, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.Gates = []v1alpha1.RolloutGate{{Name: "slow", Prometheus: &v1alpha1.PrometheusGate{URL: slow.URL, Query: "up == 0"}}}
	})
	other := newFixture(t, "so", 1, nil)
	startGatedControllerWith(t, &gate.Evaluator{Timeout: time.Minute, Budget: 8 * time.Second})

	slowPool.layer("rendered-ss-1", image('a'))
	select {
	case <-started:
	case <-time.After(timeout):
		t.Fatal("the slow gate was never asked")
	}
	other.layer("rendered-so-1", image('b'))
	other.waitTaken("rendered-so-1", image('b'), 1)
	mu.Lock()
	done := firstDone
	mu.Unlock()
	if done {
		t.Error("pool so was taken only after pool ss's slow gate gave up: one pool's gates held the other")
	}
	slowPool.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonHeldByGate,
		`Held by gate "slow" (prometheus): could not be evaluated: cannot run the query up == 0: `+slow.URL+` api/v1/query: timed out`)
	slowPool.assertNoneTaken("rendered-ss-1", image('a'), "its gate timed out")
}
