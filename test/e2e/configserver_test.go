//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/simnode"
)

// New nodes end to end (issue 25): a layered pool of three simulated
// nodes gets a fourth, which boots from the base image with the pointer
// config `stratactl node-config` prints, fetches its Ignition from the
// config server Deployment through its Service, switches to the pool's
// image with one reboot before its kubelet starts, and joins Ready on it.
const (
	joinPool  = "e2e-join"
	joinOther = "e2e-join-other"
	joinMC    = "50-e2e-join"
)

var _ = Describe("A new node", Ordered, func() {
	var (
		c          client.Client
		kubeconfig string
		sims       *simnode.Cluster
		original   string
		image      string
		server     string
	)

	// Its own timeout, and the specs' are node timeouts: a SpecTimeout
	// of the first spec would bound this BeforeAll too (the second run
	// timed out after two minutes of it).
	BeforeAll(NodeTimeout(15*time.Minute), func(ctx SpecContext) {
		kubeconfig = e2eKubeconfig()
		c = newClient(kubeconfig)
		registrySecrets(ctx, c)
		var nodes []string
		By("a layered pool of three simulated nodes on its built image")
		sims, nodes, original = simulatedNodes(ctx, kubeconfig, "join", 3, map[string]string{joinPool: "true"})
		DeferCleanup(func(ctx SpecContext) {
			for _, obj := range []client.Object{
				&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: joinPool}},
				&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: joinMC}},
				&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: joinPool}},
				&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: joinOther}},
			} {
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
			}
		})
		for _, p := range []string{joinPool, joinOther} {
			Expect(c.Create(ctx, &v1alpha1.MachineConfigPool{
				ObjectMeta: metav1.ObjectMeta{Name: p},
				Spec: v1alpha1.MachineConfigPoolSpec{
					NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{p: "true"}},
					MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{p: "true"}},
					MaxUnavailable:        ptr.To(intstr.FromInt32(3)),
					HealthCheckTimeout:    &metav1.Duration{Duration: 20 * time.Second},
					// Takes new nodes: the controller keeps a token.
					BootstrapToken: &v1alpha1.BootstrapToken{},
				},
			})).To(Succeed())
		}
		Expect(c.Create(ctx, &v1alpha1.MachineConfig{
			ObjectMeta: metav1.ObjectMeta{Name: joinMC, Labels: map[string]string{joinPool: "true"}},
			Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[
				{"path":"/etc/strata-join.conf","mode":420,"contents":{"source":"data:,joined"}},
				{"path":"/var/lib/strata-e2e/join","mode":384,"contents":{"source":"data:,joined"}}]}}`)}},
		})).To(Succeed())
		Expect(c.Create(ctx, &v1alpha1.MachineOSConfig{
			ObjectMeta: metav1.ObjectMeta{Name: joinPool},
			Spec: v1alpha1.MachineOSConfigSpec{
				MachineConfigPool:       v1alpha1.LocalObjectReference{Name: joinPool},
				ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
				BaseImagePullSpec:       registry + "/strata/os-base:latest",
				RenderedImagePushSecret: v1alpha1.SecretReference{Name: "e2e-push"},
				RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "e2e-pull"},
				RenderedImagePushSpec:   registry + "/strata/e2e-join:latest",
			},
		})).To(Succeed())
		Eventually(func(g Gomega) {
			p := &v1alpha1.MachineConfigPool{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: joinPool}, p)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.PoolUpdated)).To(BeTrue())
			g.Expect(p.Status.NewNodes).NotTo(BeNil())
			image = p.Status.NewNodes.Image
		}).WithContext(ctx).WithTimeout(10 * time.Minute).WithPolling(time.Second).Should(Succeed())
		waitNodesOn(ctx, c, nodes, image)

		By("the config server reachable from the nodes at 127.0.0.1, with a certificate for it")
		svc := &corev1.Service{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: strataNS, Name: "strata-config-server"}, svc)).To(Succeed())
		svc.Annotations["machineconfiguration.strata.dev/server-names"] = "127.0.0.1"
		Expect(c.Update(ctx, svc)).To(Succeed())
		// The names are re-read at renewal; deleting the certificate renews it now.
		Expect(client.IgnoreNotFound(c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.ConfigServerNamespace, Name: v1alpha1.ConfigServerTLSSecret}}))).To(Succeed())
		// kubectl port-forward gives up at the first refused connection:
		// forward once the server listens, that is, once it is Ready.
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: strataNS, Name: "strata-config-server"}, d)).To(Succeed())
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
			g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
			g.Expect(d.Status.ReadyReplicas).To(Equal(*d.Spec.Replicas), "the config server is not Ready")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		port := portForward(ctx, kubeconfig)
		server = "https://127.0.0.1:" + port
		Eventually(func() error {
			_, err := nodeConfig(ctx, server, joinPool)
			if err != nil {
				return err
			}
			_, err = simnode.FetchIgnition(ctx, mustNodeConfig(ctx, server, joinPool))
			return err
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	AfterEach(func() {
		Expect(sims.Err()).NotTo(HaveOccurred(), "the simulated nodes failed behind the test's back")
	})

	It("gets nothing without its pool's token", NodeTimeout(2*time.Minute), func(ctx SpecContext) {
		other := mustNodeConfig(ctx, server, joinOther)
		// The other pool's pointer config, aimed at this pool.
		stolen := []byte(strings.Replace(string(other), "/config/"+joinOther, "/config/"+joinPool, 1))
		var h *simnode.HTTPError
		_, err := simnode.FetchIgnition(ctx, stolen)
		Expect(errors.As(err, &h)).To(BeTrue(), "another pool's token: %v", err)
		Expect(h.Code).To(Equal(http.StatusForbidden))
		noToken := regexp.MustCompile(`"Bearer [^"]*"`).ReplaceAll(mustNodeConfig(ctx, server, joinPool), []byte(`""`))
		_, err = simnode.FetchIgnition(ctx, noToken)
		Expect(errors.As(err, &h)).To(BeTrue(), "no token: %v", err)
		Expect(h.Code).To(BeNumerically(">=", 400))
	})

	It("joins from the base image on the pool's image with one reboot, never on the base", NodeTimeout(8*time.Minute), func(ctx SpecContext) {
		config, err := simnode.FetchIgnition(ctx, mustNodeConfig(ctx, server, joinPool))
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		res, err := sims.JoinNode(ctx, original, config, map[string]string{joinPool: "true"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Reboots).To(Equal(1))
		// Registered only once its first boot was done: its first
		// report is already the pool's image.
		waitJoinedOn(ctx, c, res.Name, image)
		Eventually(func(g Gomega) {
			p := &v1alpha1.MachineConfigPool{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: joinPool}, p)).To(Succeed())
			g.Expect(p.Status.MachineCount).To(Equal(int32(4)))
			g.Expect(p.Status.UpdatedMachineCount).To(Equal(int32(4)))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		Expect(sims.Reboots(res.Name)).To(Equal(1), "the daemon rebooted the new node again")
		root := sims.Root(res.Name)
		Expect(os.ReadFile(filepath.Join(root, "etc", "strata-join.conf"))).To(Equal([]byte("joined")))
		Expect(os.ReadFile(filepath.Join(root, "var", "lib", "strata-e2e", "join"))).To(Equal([]byte("joined")))
		fmt.Fprintf(GinkgoWriter, "new node %s: from start to registered Ready %v, to Done on the pool's image %v, %d reboot\n",
			res.Name, res.Registered.Sub(start).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), res.Reboots)
	})

	It("joins with no reboot when installed with the pool's image", NodeTimeout(5*time.Minute), func(ctx SpecContext) {
		config, err := simnode.FetchIgnition(ctx, mustNodeConfig(ctx, server, joinPool))
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		res, err := sims.JoinNode(ctx, image, config, map[string]string{joinPool: "true"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Reboots).To(Equal(0))
		waitJoinedOn(ctx, c, res.Name, image)
		Expect(sims.Reboots(res.Name)).To(Equal(0))
		fmt.Fprintf(GinkgoWriter, "new node %s: from start to registered Ready %v, to Done on the pool's image %v, %d reboots\n",
			res.Name, res.Registered.Sub(start).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), res.Reboots)
	})

	// The token Secret is namespaced, its owner the cluster-scoped pool:
	// the cluster's garbage collector deletes it with the pool.
	It("loses its pool's token with the pool", NodeTimeout(2*time.Minute), func(ctx SpecContext) {
		key := client.ObjectKey{Namespace: v1alpha1.ConfigServerNamespace, Name: v1alpha1.BootstrapTokenSecretName(joinOther)}
		Expect(c.Get(ctx, key, &corev1.Secret{})).To(Succeed())
		Expect(c.Delete(ctx, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: joinOther}})).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(c.Get(ctx, key, &corev1.Secret{}))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue(), "token Secret %s outlived its pool", key)
	})
	// Issue 37 finding 2, end to end: root on one node of the pool, with
	// its daemon's token, reports the image of its choice as its own,
	// Degraded, while the pool rolls out a new build: the rollout halts,
	// and new nodes get what the controller released before (the first
	// build), never the image the node reported.
	It("gets the controller's release whatever a daemon's token reports", NodeTimeout(12*time.Minute), func(ctx SpecContext) {
		p := &v1alpha1.MachineConfigPool{}
		Expect(c.Get(ctx, client.ObjectKey{Name: joinPool}, p)).To(Succeed())
		Expect(p.Status.NewNodes).NotTo(BeNil())
		released := *p.Status.NewNodes
		Expect(released.Image).To(Equal(image))

		By("a second build of the pool, which the rollout starts to take nodes to")
		mc := &v1alpha1.MachineConfig{}
		Expect(c.Get(ctx, client.ObjectKey{Name: joinMC}, mc)).To(Succeed())
		mc.Spec.Config = runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[
			{"path":"/etc/strata-join.conf","mode":420,"contents":{"source":"data:,joined%20again"}},
			{"path":"/var/lib/strata-e2e/join","mode":384,"contents":{"source":"data:,joined"}}]}}`)}
		Expect(c.Update(ctx, mc)).To(Succeed())
		var attacker, second string
		Eventually(func(g Gomega) {
			var nodes corev1.NodeList
			g.Expect(c.List(ctx, &nodes, client.MatchingLabels{joinPool: "true"})).To(Succeed())
			for _, n := range nodes.Items {
				if d := n.Annotations[v1alpha1.DesiredImageAnnotation]; d != "" && d != image {
					attacker, second = n.Name, d
					return
				}
			}
			g.Expect(attacker).NotTo(BeEmpty(), "no node of the pool taken to a second build yet")
		}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(time.Second).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "node %s taken to the second build %s\n", attacker, second)
		// Until the node's update is over its simulator may restart its
		// daemon (the reboot does), which would write its reports over
		// the attacker's: wait until it runs the second build.
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: attacker}, n)).To(Succeed())
			g.Expect(n.Annotations[v1alpha1.StateAnnotation]).To(Equal(v1alpha1.NodeStateDone))
			g.Expect(n.Annotations[v1alpha1.CurrentImageAnnotation]).To(Equal(second))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())

		By("node " + attacker + "'s root, with its daemon's identity, reporting an image of its choice, Degraded")
		// Its own daemon stopped, so that only the attacker writes the
		// node's reports; the identity is the one the API server gives a
		// token bound to a strata-daemon pod on that node.
		Expect(sims.KillDaemon(attacker)).To(Succeed())
		DeferCleanup(func() { Expect(sims.StartDaemon(attacker)).To(Succeed()) })
		cfg := restConfig()
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: "system:serviceaccount:" + strataNS + ":strata-daemon",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + strataNS, "system:authenticated"},
			Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {attacker}},
		}
		asDaemon, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		chosen := registry + "/strata/e2e-chosen@sha256:" + strings.Repeat("e", 64)
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			v1alpha1.CurrentImageAnnotation:  chosen,
			v1alpha1.CurrentConfigAnnotation: "rendered-e2e-chosen",
			v1alpha1.StateAnnotation:         v1alpha1.NodeStateDegraded,
			v1alpha1.ReasonAnnotation:        "rolled back",
		}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = asDaemon.CoreV1().Nodes().Patch(ctx, attacker, types.MergePatchType, body, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred(), "the daemon's identity may write its own node's reports")

		By("the rollout halted, new nodes on the controller's earlier release")
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKey{Name: joinPool}, p)).To(Succeed())
			u := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PoolUpdated)
			g.Expect(u).NotTo(BeNil())
			g.Expect(u.Reason).To(Equal(v1alpha1.ReasonRolloutHalted), "Updated: %s", u.Message)
			g.Expect(p.Status.NewNodes).To(Equal(&released), "status.newNodes of the halted pool")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		config, err := simnode.FetchIgnition(ctx, mustNodeConfig(ctx, server, joinPool))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(config)).To(ContainSubstring("--image="+released.Image), "the config server's first boot")
		Expect(string(config)).NotTo(ContainSubstring(chosen))
		Expect(string(config)).NotTo(ContainSubstring(second), "the halted rollout's image")
	})
})

func nodeConfig(ctx context.Context, server, pool string) ([]byte, error) {
	out, err := stratactl(ctx, "node-config", pool, "--server", server)
	if err != nil {
		return nil, fmt.Errorf("stratactl node-config: %w: %s", err, out)
	}
	return []byte(out), nil
}

func mustNodeConfig(ctx context.Context, server, pool string) []byte {
	b, err := nodeConfig(ctx, server, pool)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// portForward forwards a local port to the config server's Service until
// the spec container ends, and returns the port.
func portForward(ctx context.Context, kubeconfig string) string {
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cmd := exec.CommandContext(pctx, "kubectl", "--kubeconfig", kubeconfig, "-n", strataNS, "port-forward",
		"service/strata-config-server", ":22623")
	out, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { cancel(); _ = cmd.Wait() })
	// "Forwarding from 127.0.0.1:41234 -> 22623"
	re := regexp.MustCompile(`127\.0\.0\.1:(\d+) ->`)
	ports := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case ports <- m[1]:
				default:
				}
			}
		}
	}()
	var port string
	Eventually(ports).WithTimeout(2 * time.Minute).Should(Receive(&port))
	return port
}

// waitJoinedOn waits until a joined node reports Done on image. Unlike
// waitNodesOn it wants no uncordon: a node that joins on the pool's
// image is never taken by the rollout, so it is never drained, and it
// must never have been cordoned or drained at all.
func waitJoinedOn(ctx context.Context, c client.Client, name, image string) {
	Eventually(func(g Gomega) {
		n := getNode(ctx, c, name)
		a := n.Annotations
		g.Expect(a[v1alpha1.CurrentImageAnnotation]).To(Equal(image), "node %s (state %s: %s)", name, a[v1alpha1.StateAnnotation], a[v1alpha1.ReasonAnnotation])
		g.Expect(a[v1alpha1.StateAnnotation]).To(Equal(v1alpha1.NodeStateDone), "node %s: %s", name, a[v1alpha1.ReasonAnnotation])
		g.Expect(a[v1alpha1.LastAppliedDrainAnnotation]).To(BeEmpty(), "node %s was drained, but it joined on the pool's image", name)
		g.Expect(n.Spec.Unschedulable).To(BeFalse(), "node %s is cordoned", name)
	}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
}
