//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/simnode"
)

// Strata as hack/cluster/deploy.sh installs it (config/default through
// config/testcluster): the controller Deployment, the daemon's DaemonSet
// on the real node, the metrics endpoint and the admission policy that
// keeps a daemon to its own Node.

const (
	controllerSelector = "app.kubernetes.io/name=strata,app.kubernetes.io/component=controller"
	daemonSelector     = "app.kubernetes.io/name=strata,app.kubernetes.io/component=daemon"
	configSelector     = "app.kubernetes.io/name=strata,app.kubernetes.io/component=config-server"
	// metricsURL is the controller's metrics endpoint: on the test
	// cluster its pod is on the host network.
	metricsURL = "https://127.0.0.1:8443/metrics"
)

var _ = Describe("Strata installed from config/default", func() {
	It("runs the controller as a Deployment and the daemon on the real node, which reports Done", func(ctx SpecContext) {
		pod := controllerPod(ctx)
		Expect(pod.Spec.ServiceAccountName).To(Equal("strata-controller"))
		Expect(pod.Spec.Containers[0].Image).To(MatchRegexp(`^127\.0\.0\.1:5000/strata/strata-controller@sha256:[0-9a-f]{64}$`))
		Expect(pod.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))

		By("reading the controller's JSON log through the API")
		logs, err := podLogs(ctx, strataNS, pod.Name)
		Expect(err).NotTo(HaveOccurred())
		var started bool
		sc := bufio.NewScanner(strings.NewReader(logs))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e map[string]any
			Expect(json.Unmarshal(sc.Bytes(), &e)).To(Succeed(), "log line %q is not JSON", sc.Text())
			started = started || (e["msg"] == "Starting" && e["buildNamespace"] == strataNS)
		}
		Expect(started).To(BeTrue(), "no Starting entry in the controller's log:\n%s", logs)

		By("finding the daemon's one pod on the real node")
		daemon := daemonPod(ctx)
		Expect(daemon.Spec.Containers[0].Image).To(MatchRegexp(`^127\.0\.0\.1:5000/strata/strata-daemon-sim@sha256:[0-9a-f]{64}$`))
		digest, err := crane(ctx, "digest", registry+"/strata/os-base:latest")
		Expect(err).NotTo(HaveOccurred())
		original := registry + "/strata/os-base@" + strings.TrimSpace(digest)
		Eventually(func(g Gomega) {
			n, err := clientset.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Annotations).To(HaveKeyWithValue(v1alpha1.StateAnnotation, v1alpha1.NodeStateDone))
			g.Expect(n.Annotations).To(HaveKeyWithValue(v1alpha1.CurrentImageAnnotation, original))
			g.Expect(n.Annotations).To(HaveKeyWithValue(v1alpha1.OriginalImageAnnotation, original))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	})

	It("serves metrics only to clients allowed to read them", func(ctx SpecContext) {
		// The controller serves them with a certificate it signed itself.
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		get := func(token string) (int, string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
			if err != nil {
				return 0, "", err
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body), err
		}

		code, _, err := get("")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusUnauthorized), "an anonymous request")

		// Two ServiceAccounts, one bound to strata-metrics-reader: the
		// controller caches a refusal for a while, so the same account is
		// not asked before and after its binding.
		ns := newNamespace(ctx)
		tokens := map[string]string{}
		for _, name := range []string{"scraper", "stranger"} {
			_, err = clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			tok, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			tokens[name] = tok.Status.Token
		}
		binding, err := clientset.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-metrics-reader-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "strata-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(clientset.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})).To(Succeed())
		})

		code, _, err = get(tokens["stranger"])
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden), "a ServiceAccount not bound to strata-metrics-reader")
		// RBAC loads the new binding in the background, and the
		// controller would cache a refusal: ask it once RBAC answers yes.
		Eventually(func(g Gomega) {
			sar, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:                  "system:serviceaccount:" + ns + ":scraper",
				Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
			}}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sar.Status.Allowed).To(BeTrue())
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		Eventually(func(g Gomega) {
			code, body, err := get(tokens["scraper"])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(http.StatusOK))
			g.Expect(body).To(ContainSubstring("controller_runtime_reconcile_total"))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	})

	It("refuses a daemon's token on another Node and on anything but Strata's annotations of its own", func(ctx SpecContext) {
		daemon := daemonPod(ctx)
		By("asking for a token of strata-daemon bound to its pod on " + nodeName)
		tok, err := clientset.CoreV1().ServiceAccounts(strataNS).CreateToken(ctx, "strata-daemon", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: daemon.Name, UID: daemon.UID},
				ExpirationSeconds: ptr.To[int64](600),
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		cfg := rest.AnonymousClientConfig(restConfig())
		cfg.BearerToken = tok.Status.Token
		asDaemon, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		By("registering a throwaway simulated Node")
		var rnd [3]byte
		_, _ = rand.Read(rnd[:])
		other := "e2e-policy-" + hex.EncodeToString(rnd[:])
		_, err = clientset.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: other, Labels: map[string]string{simnode.SimulatedLabel: "true"}},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: simnode.SimulatedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(clientset.CoreV1().Nodes().Delete(ctx, other, metav1.DeleteOptions{})).To(Succeed())
		})

		// An annotation the daemon owns; its value is restored after.
		key := v1alpha1.ReasonAnnotation
		unknown := v1alpha1.Prefix + "e2e-policy-" + hex.EncodeToString(rnd[:])
		patch := func(node string, p map[string]any) error {
			body, err := json.Marshal(p)
			Expect(err).NotTo(HaveOccurred())
			_, err = asDaemon.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{})
			return err
		}
		annotate := func(values map[string]any) map[string]any {
			return map[string]any{"metadata": map[string]any{"annotations": values}}
		}
		refused := func(err error, want ...string) {
			GinkgoHelper()
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
			for _, w := range append([]string{"ValidatingAdmissionPolicy 'strata-daemon-node'"}, want...) {
				Expect(err.Error()).To(ContainSubstring(w))
			}
			GinkgoWriter.Printf("refused: %v\n", err)
		}

		refused(patch(other, annotate(map[string]any{key: "x"})),
			fmt.Sprintf("strata-daemon of node %s may not change Node %s", nodeName, other))
		refused(patch(nodeName, map[string]any{"metadata": map[string]any{"labels": map[string]any{"e2e-policy": "x"}}}),
			"may not change the labels of Node "+nodeName, "e2e-policy")
		refused(patch(nodeName, annotate(map[string]any{"example.com/e2e-policy": "x"})),
			"may not change the annotations example.com/e2e-policy of Node "+nodeName)
		for _, k := range []string{unknown, v1alpha1.LastAppliedDrainAnnotation, v1alpha1.CordonedForAnnotation, v1alpha1.DesiredImageAnnotation} {
			refused(patch(nodeName, annotate(map[string]any{k: "uncordon-e2e"})),
				"may not change the annotations "+k+" of Node "+nodeName)
		}

		By("setting one of its own annotations on its own Node")
		n, err := clientset.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		var was any
		if v, ok := n.Annotations[key]; ok {
			was = v
		}
		// The node's daemon may write the key again at once: only the
		// policy's answer is checked, and the value put back.
		Expect(patch(nodeName, annotate(map[string]any{key: "e2e-policy"}))).To(Succeed())
		Expect(patch(nodeName, annotate(map[string]any{key: was}))).To(Succeed())
		n, err = clientset.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Annotations).NotTo(HaveKey(unknown))
		Expect(n.Labels).NotTo(HaveKey("e2e-policy"))
		Expect(n.Annotations).NotTo(HaveKey("example.com/e2e-policy"))

		By("reading no Secret in " + strataNS + ", where the push secrets and build contexts are")
		_, err = asDaemon.CoreV1().Secrets(strataNS).Get(ctx, "e2e-push", metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the daemon's get of Secret %s/e2e-push: %v, want Forbidden", strataNS, err)
		_, err = asDaemon.CoreV1().Secrets("strata-nodes").List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the daemon's list of Secrets in strata-nodes: %v, want Forbidden", err)
	})
})

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// controllerPod returns the controller's one pod, once it is Ready.
func controllerPod(ctx context.Context) *corev1.Pod {
	var pod corev1.Pod
	Eventually(func(g Gomega) {
		pods, err := clientset.CoreV1().Pods(strataNS).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(HaveLen(1))
		pod = pods.Items[0]
		g.Expect(podReady(&pod)).To(BeTrue(), "controller pod %s is not Ready: %+v", pod.Name, pod.Status.Conditions)
	}).WithContext(ctx).WithTimeout(3 * time.Minute).Should(Succeed())
	return &pod
}

// restartController deletes the controller's pod, as a crash or a drain
// of its node would end it, and waits until the Deployment's new pod is
// Ready.
func restartController(ctx context.Context) {
	old := controllerPod(ctx)
	Expect(clientset.CoreV1().Pods(strataNS).Delete(ctx, old.Name, metav1.DeleteOptions{})).To(Succeed())
	Eventually(func(g Gomega) {
		pods, err := clientset.CoreV1().Pods(strataNS).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].UID).NotTo(Equal(old.UID))
		g.Expect(podReady(&pods.Items[0])).To(BeTrue())
	}).WithContext(ctx).WithTimeout(3 * time.Minute).Should(Succeed())
}

// daemonPod returns the daemon's pod, which must be the DaemonSet's only
// one and on the real node: the simulated nodes' daemons are processes
// of the harness.
func daemonPod(ctx context.Context) *corev1.Pod {
	var pod corev1.Pod
	Eventually(func(g Gomega) {
		pods, err := clientset.CoreV1().Pods(strataNS).List(ctx, metav1.ListOptions{LabelSelector: daemonSelector})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(HaveLen(1), "the daemon's pods")
		pod = pods.Items[0]
		g.Expect(pod.Spec.NodeName).To(Equal(nodeName))
		g.Expect(podReady(&pod)).To(BeTrue(), "daemon pod %s is not Ready: %+v", pod.Name, pod.Status.Conditions)
	}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
	return &pod
}

// dumpStrataLogs writes the last lines of the controller's, the
// daemon's and the config server's logs, for a failed spec.
func dumpStrataLogs(ctx context.Context) {
	for _, sel := range []string{controllerSelector, daemonSelector, configSelector} {
		pods, err := clientset.CoreV1().Pods(strataNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			GinkgoWriter.Printf("list pods %s: %v\n", sel, err)
			continue
		}
		for _, p := range pods.Items {
			b, err := clientset.CoreV1().Pods(strataNS).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](200)}).DoRaw(ctx)
			GinkgoWriter.Printf("--- log of %s (err %v):\n%s\n", p.Name, err, b)
		}
	}
}
