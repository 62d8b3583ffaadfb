//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/simnode"
)

// The cluster's Prometheus (hack/cluster/up.sh): its API, and the
// directory of rule files it loads on POST /-/reload.
const (
	prometheusURL = "http://127.0.0.1:19090"
	promGatePool  = "e2e-prom-gate"
	promGateAlert = "StrataE2EGateHold"
)

func prometheusRules() string {
	if d := os.Getenv("STRATA_PROMETHEUS_RULES"); d != "" {
		return d
	}
	return filepath.Join("..", "..", ".infra", "cluster", "prometheus", "rules")
}

// A rule on Strata's own metrics, scraped from the controller: it fires
// as soon as the controller is scraped, so a firing alert also proves the
// scrape.
const promGateRule = `groups:
- name: strata-e2e-gate
  rules:
  - alert: ` + promGateAlert + `
    expr: up{job="strata-controller"} == 1 and on() count(controller_runtime_reconcile_total{controller="rollout"}) > 0
    labels: {severity: critical}
`

func reloadPrometheus(ctx context.Context) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, prometheusURL+"/-/reload", nil)
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "reload: %s", resp.Status)
}

// firingAlerts lists the names of the alerts Prometheus has firing.
func firingAlerts(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, prometheusURL+"/api/v1/alerts", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	var out []string
	for _, a := range body.Data.Alerts {
		if a.State == "firing" {
			out = append(out, a.Labels["alertname"])
		}
	}
	return out, nil
}

// The Prometheus gate end to end: the cluster's real Prometheus scrapes
// the installed controller; a rule on its metrics fires, the pool holds
// with the alert's name in its condition; the rule goes, the node updates.
var _ = Describe("The Prometheus gate", Ordered, func() {
	var (
		c     client.Client
		sims  *simnode.Cluster
		node  string
		rules string
	)

	BeforeAll(func(ctx SpecContext) {
		kubeconfig := e2eKubeconfig()
		c = newClient(kubeconfig)
		var nodes []string
		sims, nodes, _ = simulatedNodes(ctx, kubeconfig, "promgate", 1, map[string]string{promGatePool: "true"})
		node = nodes[0]
		rules = filepath.Join(prometheusRules(), "e2e-gate.yaml")
		DeferCleanup(func(ctx SpecContext) {
			_ = os.Remove(rules)
			reloadPrometheus(ctx)
			for _, obj := range []client.Object{
				&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: promGatePool}},
				&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: promGatePool}},
			} {
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
			}
		})
	})

	AfterEach(func() {
		Expect(sims.Err()).NotTo(HaveOccurred(), "the simulated nodes failed behind the test's back")
	})

	It("holds the rollout while an alert on Strata's metrics fires, and goes on when it clears", SpecTimeout(6*time.Minute), func(ctx SpecContext) {
		By("a rule that fires on the controller's scraped metrics")
		Expect(os.WriteFile(rules, []byte(promGateRule), 0o644)).To(Succeed())
		reloadPrometheus(ctx)
		Eventually(firingAlerts).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).
			Should(ContainElement(promGateAlert), "the rule does not fire: is the controller scraped?")

		By("a pool gated on that alert, with a change for its node")
		ign := `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/var/lib/strata-e2e/prom-gate","mode":420,"contents":{"source":"data:,one"}}]}}`
		Expect(c.Create(ctx, &v1alpha1.MachineConfig{
			ObjectMeta: metav1.ObjectMeta{Name: promGatePool, Labels: map[string]string{promGatePool: "true"}},
			Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}},
		})).To(Succeed())
		Expect(c.Create(ctx, &v1alpha1.MachineConfigPool{
			ObjectMeta: metav1.ObjectMeta{Name: promGatePool},
			Spec: v1alpha1.MachineConfigPoolSpec{
				NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{promGatePool: "true"}},
				MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{promGatePool: "true"}},
				HealthCheckTimeout:    &metav1.Duration{Duration: 20 * time.Second},
				Gates: []v1alpha1.RolloutGate{{Name: "no-critical-alerts", Prometheus: &v1alpha1.PrometheusGate{
					URL:    prometheusURL,
					Alerts: &v1alpha1.AlertFilter{NameRegexp: "StrataE2E.*", Labels: map[string]string{"severity": "critical"}},
				}}},
			},
		})).To(Succeed())

		pool := &v1alpha1.MachineConfigPool{}
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKey{Name: promGatePool}, pool)).To(Succeed())
			got := meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.PoolUpdated)
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Reason).To(Equal(v1alpha1.ReasonHeldByGate), "%s", got.Message)
			g.Expect(got.Message).To(ContainSubstring(fmt.Sprintf(`gate "no-critical-alerts" (prometheus): firing: %s{`, promGateAlert)))
		}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "the pool is not held by the alert")
		target := pool.Status.Configuration.Name
		Expect(target).NotTo(BeEmpty())
		Expect(getNode(ctx, c, node).Annotations[v1alpha1.DesiredConfigAnnotation]).NotTo(Equal(target), "the node was taken while the alert fired")

		By("the rule goes: the alert clears and the node updates")
		Expect(os.Remove(rules)).To(Succeed())
		reloadPrometheus(ctx)
		Eventually(firingAlerts).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).
			ShouldNot(ContainElement(promGateAlert))
		Eventually(func(g Gomega) {
			n := getNode(ctx, c, node)
			g.Expect(n.Annotations[v1alpha1.CurrentConfigAnnotation]).To(Equal(target))
			g.Expect(n.Annotations[v1alpha1.StateAnnotation]).To(Equal(v1alpha1.NodeStateDone))
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "the node did not update after the alert cleared")
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKey{Name: promGatePool}, pool)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(pool.Status.Conditions, v1alpha1.PoolUpdated)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	})
})
