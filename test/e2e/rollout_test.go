//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/scheme"
	"github.com/strata-dev/strata/test/simnode"
)

// The rollout end to end: strata-controller, installed as its Deployment
// (hack/cluster/deploy.sh), builds a layered pool's image on the test
// cluster and rolls it out to three simulated nodes, each with its own strata-daemon process and bootc simulator (a
// real ostree sysroot), kept Ready by kwok, which also runs the pods bound
// to them, so drains and budgets are real.

const (
	rolloutPool = "e2e-rollout"
	rolloutMOSC = "e2e-rollout"
	rolloutMC   = "50-e2e-rollout"
)

var _ = Describe("The rollout", Ordered, func() {
	var (
		c          client.Client
		kubeconfig string
		sims       *simnode.Cluster
		nodes      []string
		original   string
		watcher    *availability
	)

	BeforeAll(func(ctx SpecContext) {
		kubeconfig = e2eKubeconfig()
		c = newClient(kubeconfig)
		registrySecrets(ctx, c)
		By("registering three simulated nodes, each with its own daemon")
		sims, nodes, original = simulatedNodes(ctx, kubeconfig, "", 3, map[string]string{"e2e-rollout": "true"})

		DeferCleanup(func(ctx SpecContext) {
			for _, obj := range []client.Object{
				&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: rolloutMOSC}},
				&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: rolloutMC}},
				&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: rolloutPool}},
			} {
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
				Eventually(func() bool {
					return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
				}).WithContext(ctx).WithTimeout(time.Minute).Should(BeTrue(), "%T %s is not deleted", obj, obj.GetName())
			}
		})

		watcher = watchAvailability(ctx)
		DeferCleanup(watcher.stop)

		Expect(c.Create(ctx, &v1alpha1.MachineConfigPool{
			ObjectMeta: metav1.ObjectMeta{Name: rolloutPool},
			Spec: v1alpha1.MachineConfigPoolSpec{
				NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"e2e-rollout": "true"}},
				MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e-rollout": "true"}},
				MaxUnavailable:        ptr.To(intstr.FromInt32(1)),
				HealthCheckTimeout:    &metav1.Duration{Duration: 20 * time.Second},
				DrainTimeout:          &metav1.Duration{Duration: 10 * time.Minute},
			},
		})).To(Succeed())
	})

	AfterEach(func() {
		Expect(sims.Err()).NotTo(HaveOccurred(), "the simulated nodes failed behind the test's back")
	})

	It("builds a MachineConfig into an image and brings every node to it, one at a time", SpecTimeout(12*time.Minute), func(ctx SpecContext) {
		watcher.reset()
		Expect(c.Create(ctx, rolloutConfig("one"))).To(Succeed())
		Expect(c.Create(ctx, &v1alpha1.MachineOSConfig{
			ObjectMeta: metav1.ObjectMeta{Name: rolloutMOSC},
			Spec: v1alpha1.MachineOSConfigSpec{
				MachineConfigPool:       v1alpha1.LocalObjectReference{Name: rolloutPool},
				ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
				BaseImagePullSpec:       registry + "/strata/os-base:latest",
				RenderedImagePushSecret: v1alpha1.SecretReference{Name: "e2e-push"},
				RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "e2e-pull"},
				RenderedImagePushSpec:   registry + "/strata/e2e-rollout:latest",
			},
		})).To(Succeed())

		image := waitPoolImage(ctx, c, "")
		waitNodesOn(ctx, c, nodes, image)
		By("finding each node's MachineConfigNode Updated, on the built image")
		for _, n := range nodes {
			Eventually(func(g Gomega) {
				m := &v1alpha1.MachineConfigNode{}
				g.Expect(c.Get(ctx, client.ObjectKey{Name: n}, m)).To(Succeed())
				g.Expect(m.Spec.Pool.Name).To(Equal(rolloutPool))
				g.Expect(m.Status.ConfigImage.CurrentImage).To(Equal(image))
				g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MCNUpdated)).To(BeTrue(), "conditions %v", m.Status.Conditions)
				g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MCNRebootedNode)).To(BeTrue(), "conditions %v", m.Status.Conditions)
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "node %s", n)
		}
		Expect(watcher.max()).To(Equal(1), "more nodes unavailable at once than maxUnavailable 1: %s", watcher)
		for _, n := range nodes {
			Expect(sims.Reboots(n)).To(Equal(1), "node %s", n)
			root := sims.Root(n)
			Expect(os.ReadFile(filepath.Join(root, "etc", "strata-rollout.conf"))).To(Equal([]byte("one")), "node %s /etc from the booted image", n)
			fi, err := os.Stat(filepath.Join(root, "var", "lib", "strata-e2e", "data"))
			Expect(err).NotTo(HaveOccurred(), "node %s /var-bound file", n)
			Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
			kargs, err := sims.Sim(ctx, n, "sim", "kargs")
			Expect(err).NotTo(HaveOccurred())
			Expect(string(kargs)).To(ContainSubstring("strata.e2e=one"), "node %s kargs", n)
			auth, err := os.ReadFile(filepath.Join(root, "run", "ostree", "auth.json"))
			Expect(err).NotTo(HaveOccurred(), "node %s pull secret", n)
			Expect(string(auth)).To(ContainSubstring(e2ePullAuth), "node %s pulls with the pull secret", n)
			Expect(string(auth)).NotTo(ContainSubstring(e2ePushAuth), "node %s holds the push secret", n)
		}
		By("finding the pull secret, and only it, copied to " + nodeSecretsNS)
		_, err := clientset.CoreV1().Secrets(nodeSecretsNS).Get(ctx, "e2e-pull", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = clientset.CoreV1().Secrets(nodeSecretsNS).Get(ctx, "e2e-push", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the push secret in %s: %v", nodeSecretsNS, err)
		watcher.report("first rollout")
		waitPoolCondition(ctx, c, v1alpha1.PoolUpdated, metav1.ConditionTrue)

		By("finding no daemon pod on the simulated nodes, whose daemons are the harness's")
		daemons, err := clientset.CoreV1().Pods(strataNS).List(ctx, metav1.ListOptions{LabelSelector: daemonSelector})
		Expect(err).NotTo(HaveOccurred())
		for _, p := range daemons.Items {
			Expect(p.Spec.NodeName).To(Equal(nodeName), "daemon pod %s", p.Name)
		}
	})

	It("rolls a second change out two at a time, held by a PodDisruptionBudget until it is relaxed", SpecTimeout(12*time.Minute), func(ctx SpecContext) {
		for _, n := range nodes {
			reboots[n] = sims.Reboots(n)
		}
		By("a workload on the first node protected by a budget that allows no disruption")
		ns := newNamespace(ctx)
		// minAvailable, not maxUnavailable: the disruption controller cannot
		// count the expected pods of a pod without a controller, and then
		// a maxUnavailable budget never allows an eviction.
		one := intstr.FromInt32(1)
		Expect(c.Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hold"},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "held"}}},
		})).To(Succeed())
		Expect(c.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", Labels: map[string]string{"app": "held"}},
			Spec: corev1.PodSpec{
				NodeName:    nodes[0],
				Tolerations: []corev1.Toleration{{Key: simnode.SimulatedTaint, Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "app", Image: registry + "/strata/busybox:latest"}},
			},
		})).To(Succeed())
		Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "held"}, p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())

		update(ctx, c, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: rolloutPool}}, func(p *v1alpha1.MachineConfigPool) {
			p.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		})
		before := currentImage(ctx, c)
		watcher.reset()
		update(ctx, c, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: rolloutMC}}, func(mc *v1alpha1.MachineConfig) {
			mc.Spec = rolloutConfig("two").Spec
		})
		image := waitPoolImage(ctx, c, before)

		By("the first node waits in its drain while the budget holds")
		Eventually(func(g Gomega) {
			n := getNode(ctx, c, nodes[0])
			g.Expect(n.Spec.Unschedulable).To(BeTrue())
			g.Expect(n.Annotations[v1alpha1.DesiredDrainAnnotation]).To(HavePrefix(v1alpha1.DrainRequestPrefix))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).Should(Succeed())
		Consistently(func(g Gomega) {
			n := getNode(ctx, c, nodes[0])
			g.Expect(n.Annotations[v1alpha1.LastAppliedDrainAnnotation]).NotTo(Equal(n.Annotations[v1alpha1.DesiredDrainAnnotation]))
			g.Expect(n.Annotations[v1alpha1.CurrentImageAnnotation]).NotTo(Equal(image))
		}).WithContext(ctx).WithTimeout(8 * time.Second).Should(Succeed())

		By("relaxing the budget lets the drain finish")
		update(ctx, c, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hold"}}, func(pdb *policyv1.PodDisruptionBudget) {
			pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(0))
		})

		By("deleting the controller's pod mid-rollout")
		restartController(ctx)

		waitNodesOn(ctx, c, nodes, image)
		Expect(watcher.max()).To(BeNumerically("<=", 2), "more nodes unavailable at once than maxUnavailable 2: %s", watcher)
		Expect(watcher.max()).To(Equal(2), "two nodes should have updated together: %s", watcher)
		for _, n := range nodes {
			Expect(sims.Reboots(n)-reboots[n]).To(Equal(1), "node %s rebooted more than once for one change", n)
			Expect(os.ReadFile(filepath.Join(sims.Root(n), "etc", "strata-rollout.conf"))).To(Equal([]byte("two")))
		}
		Eventually(func(g Gomega) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "held"}, &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the held pod was not evicted: %v", err)
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		watcher.report("second rollout")
	})

	It("converges with one reboot per node when a daemon is killed mid-update", SpecTimeout(12*time.Minute), func(ctx SpecContext) {
		for _, n := range nodes {
			reboots[n] = sims.Reboots(n)
		}
		before := currentImage(ctx, c)
		update(ctx, c, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: rolloutMC}}, func(mc *v1alpha1.MachineConfig) {
			mc.Spec = rolloutConfig("three").Spec
		})
		image := waitPoolImage(ctx, c, before)

		By("killing the first daemon once it has asked for its drain, and starting it again")
		Eventually(func(g Gomega) {
			n := getNode(ctx, c, nodes[0])
			g.Expect(n.Annotations[v1alpha1.DesiredDrainAnnotation]).To(HavePrefix(v1alpha1.DrainRequestPrefix))
			g.Expect(n.Annotations[v1alpha1.DesiredImageAnnotation]).To(Equal(image))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
		Expect(sims.KillDaemon(nodes[0])).To(Succeed())
		Expect(sims.StartDaemon(nodes[0])).To(Succeed())

		waitNodesOn(ctx, c, nodes, image)
		for _, n := range nodes {
			Expect(sims.Reboots(n)-reboots[n]).To(Equal(1), "node %s", n)
		}
		Expect(strings.Count(sims.DaemonLog(nodes[0]), "Staging the desired image")).To(Equal(strings.Count(sims.DaemonLog(nodes[1]), "Staging the desired image")),
			"the restarted daemon downloaded the image again")
	})

	It("rolls a node back when its new image fails to boot, halts, and reports why", SpecTimeout(12*time.Minute), func(ctx SpecContext) {
		By("pausing the pool while the image that will fail is built")
		setPaused(ctx, c, true)
		update(ctx, c, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: rolloutPool}}, func(p *v1alpha1.MachineConfigPool) {
			p.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		})
		before := currentImage(ctx, c)
		update(ctx, c, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: rolloutMC}}, func(mc *v1alpha1.MachineConfig) {
			mc.Spec = rolloutConfig("broken").Spec
		})
		bad := waitPoolImage(ctx, c, before)
		for _, n := range nodes {
			_, err := sims.Sim(ctx, n, "sim", "fail-boot", bad[strings.Index(bad, "@")+1:])
			Expect(err).NotTo(HaveOccurred())
		}
		setPaused(ctx, c, false)

		var failed string
		Eventually(func(g Gomega) {
			failed = ""
			for _, n := range nodes {
				if getNode(ctx, c, n).Annotations[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDegraded {
					failed = n
				}
			}
			g.Expect(failed).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(5 * time.Minute).Should(Succeed())
		n := getNode(ctx, c, failed)
		Expect(n.Annotations[v1alpha1.ReasonAnnotation]).To(ContainSubstring(bad[strings.Index(bad, "@")+1:]))
		Expect(n.Annotations[v1alpha1.CurrentImageAnnotation]).To(Equal(before), "the failed node runs its previous image again")
		Expect(os.ReadFile(filepath.Join(sims.Root(failed), "etc", "strata-rollout.conf"))).To(Equal([]byte("three")))

		By("the pool says why and takes no other node")
		waitPoolCondition(ctx, c, v1alpha1.PoolNodeDegraded, metav1.ConditionTrue)
		Consistently(func(g Gomega) {
			for _, other := range nodes {
				if other == failed {
					continue
				}
				g.Expect(getNode(ctx, c, other).Annotations[v1alpha1.DesiredImageAnnotation]).To(Equal(before), "node %s was taken after a failure", other)
			}
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		out, err := kubectl(ctx, kubeconfig, "get", "mcp", rolloutPool)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("kubectl get mcp:\n%s\n", out)
		Expect(out).To(MatchRegexp(`(?m)^` + rolloutPool + `\s+\S+\s+False\s+\S+\s+True\s`))
		p := &v1alpha1.MachineConfigPool{}
		Expect(c.Get(ctx, client.ObjectKey{Name: rolloutPool}, p)).To(Succeed())
		Expect(meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PoolNodeDegraded).Message).To(ContainSubstring(failed))
	})

	It("takes every node back to its original image when the MachineOSConfig is deleted", SpecTimeout(10*time.Minute), func(ctx SpecContext) {
		Expect(c.Delete(ctx, &v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: rolloutMOSC}})).To(Succeed())
		waitNodesOn(ctx, c, nodes, original)
		for _, n := range nodes {
			st, err := sims.Sim(ctx, n, "status", "--format=json")
			Expect(err).NotTo(HaveOccurred())
			var host struct {
				Status struct {
					Booted struct {
						Image struct {
							ImageDigest string `json:"imageDigest"`
						} `json:"image"`
					} `json:"booted"`
				} `json:"status"`
			}
			Expect(json.Unmarshal(st, &host)).To(Succeed())
			Expect(original).To(HaveSuffix("@"+host.Status.Booted.Image.ImageDigest), "node %s boots its original image", n)
			_, err = os.Stat(filepath.Join(sims.Root(n), "etc", "strata-rollout.conf"))
			Expect(os.IsNotExist(err)).To(BeTrue(), "node %s keeps the layered file: %v", n, err)
		}
	})
})

// reboots holds each node's reboot count before a spec's change.
var reboots = map[string]int{}

// rolloutConfig is the pool's MachineConfig: a file in /etc (baked into
// the image), a /var-bound file (written by the daemon) and a kernel
// argument, all carrying the version.
func rolloutConfig(version string) *v1alpha1.MachineConfig {
	ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[
		{"path":"/etc/strata-rollout.conf","mode":420,"contents":{"source":"data:,%s"}},
		{"path":"/var/lib/strata-e2e/data","mode":384,"contents":{"source":"data:,%s"}}]}}`, version, version)
	return &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: rolloutMC, Labels: map[string]string{"e2e-rollout": "true"}},
		Spec: v1alpha1.MachineConfigSpec{
			Config:          runtime.RawExtension{Raw: []byte(ign)},
			KernelArguments: []string{"strata.e2e=" + version},
		},
	}
}

func currentImage(ctx context.Context, c client.Client) string {
	m := &v1alpha1.MachineOSConfig{}
	Expect(c.Get(ctx, client.ObjectKey{Name: rolloutMOSC}, m)).To(Succeed())
	return m.Status.CurrentImagePullSpec
}

// waitPoolImage waits until the MachineOSConfig's image is built from the
// pool's current rendered config and differs from not.
func waitPoolImage(ctx context.Context, c client.Client, not string) string {
	return waitImageOf(ctx, c, rolloutPool, rolloutMOSC, not)
}

// waitImageOf is waitPoolImage for any pool and its MachineOSConfig.
func waitImageOf(ctx context.Context, c client.Client, pool, mosc, not string) string {
	var image string
	Eventually(func(g Gomega) {
		p := &v1alpha1.MachineConfigPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: pool}, p)).To(Succeed())
		m := &v1alpha1.MachineOSConfig{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: mosc}, m)).To(Succeed())
		g.Expect(m.Status.MachineOSBuild).NotTo(BeNil())
		b := &v1alpha1.MachineOSBuild{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: m.Status.MachineOSBuild.Name}, b)).To(Succeed())
		if meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildFailed) {
			StopTrying(fmt.Sprintf("build %s failed: %+v", b.Name, b.Status.Failure)).Now()
		}
		g.Expect(b.Spec.MachineConfig.Name).To(Equal(p.Status.Configuration.Name))
		g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildSucceeded)).To(BeTrue())
		image = b.Status.DigestedImagePushSpec
		g.Expect(image).NotTo(Equal(not))
	}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return image
}

// waitNodesOn waits until every node reports Done on image.
func waitNodesOn(ctx context.Context, c client.Client, nodes []string, image string) {
	Eventually(func(g Gomega) {
		for _, name := range nodes {
			a := getNode(ctx, c, name).Annotations
			g.Expect(a[v1alpha1.CurrentImageAnnotation]).To(Equal(image), "node %s (state %s: %s)", name, a[v1alpha1.StateAnnotation], a[v1alpha1.ReasonAnnotation])
			g.Expect(a[v1alpha1.StateAnnotation]).To(Equal(v1alpha1.NodeStateDone), "node %s: %s", name, a[v1alpha1.ReasonAnnotation])
			g.Expect(a[v1alpha1.LastAppliedDrainAnnotation]).To(HavePrefix(v1alpha1.UncordonRequestPrefix), "node %s is not uncordoned", name)
		}
	}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
}

func getNode(ctx context.Context, c client.Client, name string) *corev1.Node {
	n := &corev1.Node{}
	Expect(c.Get(ctx, client.ObjectKey{Name: name}, n)).To(Succeed())
	return n
}

func setPaused(ctx context.Context, c client.Client, paused bool) {
	update(ctx, c, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: rolloutPool}}, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.Paused = paused
	})
}

// update changes obj's spec as a person's kubectl edit would: read, change,
// write, and again on a conflict, since the controllers write the same
// objects' status all the time.
func update[T client.Object](ctx context.Context, c client.Client, obj T, change func(T)) {
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return c.Update(ctx, obj)
	})).To(Succeed())
}

func waitPoolCondition(ctx context.Context, c client.Client, cond string, want metav1.ConditionStatus) {
	Eventually(func(g Gomega) {
		p := &v1alpha1.MachineConfigPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: rolloutPool}, p)).To(Succeed())
		got := meta.FindStatusCondition(p.Status.Conditions, cond)
		g.Expect(got).NotTo(BeNil())
		g.Expect(got.Status).To(Equal(want), "%s: %s", got.Reason, got.Message)
	}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
}

// availability watches the nodes over a whole rollout and keeps the most
// that were unavailable at once (not Ready, updating, or Degraded), and
// when each node's update passed its protocol's steps, for the overhead
// measurement.
type availability struct {
	mu      sync.Mutex
	nodes   map[string]*corev1.Node
	most    int
	history []string
	steps   map[string]*nodeSteps
	cancel  context.CancelFunc
	done    chan struct{}
}

// nodeSteps are when the watch first saw each step of a node's update.
type nodeSteps struct {
	desired, working, drainAsked, rebooting, readyAgain, done time.Time
	desiredImage                                              string
}

func watchAvailability(ctx context.Context) *availability {
	a := &availability{nodes: map[string]*corev1.Node{}, steps: map[string]*nodeSteps{}, done: make(chan struct{})}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	w, err := clientset.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{LabelSelector: "e2e-rollout=true"})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer close(a.done)
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			a.observe(n, time.Now())
		}
	}()
	return a
}

func (a *availability) observe(n *corev1.Node, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.nodes[n.Name]
	a.nodes[n.Name] = n
	count := 0
	var down []string
	for name, node := range a.nodes {
		if unavailable(node) {
			count++
			down = append(down, name)
		}
	}
	if count > a.most {
		a.most = count
		a.history = append(a.history, fmt.Sprintf("%s: %d unavailable %v", now.Format(time.StampMilli), count, down))
	}
	ann := n.Annotations
	s := a.steps[n.Name]
	if s == nil || s.desiredImage != ann[v1alpha1.DesiredImageAnnotation] {
		s = &nodeSteps{desiredImage: ann[v1alpha1.DesiredImageAnnotation], desired: now}
		a.steps[n.Name] = s
	}
	stamp := func(t *time.Time, cond bool) {
		if cond && t.IsZero() {
			*t = now
		}
	}
	stamp(&s.working, ann[v1alpha1.StateAnnotation] == v1alpha1.NodeStateWorking)
	stamp(&s.drainAsked, strings.HasPrefix(ann[v1alpha1.DesiredDrainAnnotation], v1alpha1.DrainRequestPrefix))
	stamp(&s.rebooting, ann[v1alpha1.StateAnnotation] == v1alpha1.NodeStateRebooting)
	stamp(&s.readyAgain, !s.rebooting.IsZero() && old != nil && !nodeReady(old) && nodeReady(n))
	stamp(&s.done, ann[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDone && ann[v1alpha1.CurrentImageAnnotation] == s.desiredImage)
}

func unavailable(n *corev1.Node) bool {
	a := n.Annotations
	switch a[v1alpha1.StateAnnotation] {
	case v1alpha1.NodeStateWorking, v1alpha1.NodeStateRebooting, v1alpha1.NodeStateDegraded:
		return true
	}
	desired := a[v1alpha1.DesiredImageAnnotation]
	return !nodeReady(n) || (desired != "" && desired != a[v1alpha1.CurrentImageAnnotation])
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (a *availability) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.most, a.history = 0, nil
}

func (a *availability) max() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.most
}

func (a *availability) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.history, "; ")
}

// report prints, per node, the update's time from desired set to Done and
// the protocol's own share of it: the total minus the download (Working
// until the drain request, which follows the staged switch) and the
// simulated reboot (Rebooting until Ready again).
func (a *availability) report(what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, s := range a.steps {
		if s.done.IsZero() || s.working.IsZero() || s.drainAsked.IsZero() || s.rebooting.IsZero() || s.readyAgain.IsZero() {
			continue
		}
		total := s.done.Sub(s.desired)
		download := s.drainAsked.Sub(s.working)
		reboot := s.readyAgain.Sub(s.rebooting)
		GinkgoWriter.Printf("MEASURE %s node %s: desired→Done %s, download %s, reboot %s, protocol overhead %s\n",
			what, name, total.Round(time.Millisecond), download.Round(time.Millisecond), reboot.Round(time.Millisecond),
			(total - download - reboot).Round(time.Millisecond))
	}
}

func (a *availability) stop() {
	a.cancel()
	<-a.done
}

func newClient(kubeconfig string) client.Client {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	s := scheme.New()
	Expect(apiextensionsv1.AddToScheme(s)).To(Succeed())
	c, err := client.New(cfg, client.Options{Scheme: s})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// kubectl runs the test cluster's kubectl, as a user would.
func kubectl(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}
