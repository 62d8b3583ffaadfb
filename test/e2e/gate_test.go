//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/simnode"
)

const gatePool = "e2e-gate"

// The approval gate end to end: a MachineOSConfig with imageApproval
// Required, the controller as installed, a simulated node with its real
// daemon, and stratactl as a person runs it.
var _ = Describe("The approval gate", Ordered, func() {
	var (
		kubeconfig string
		c          client.Client
		sims       *simnode.Cluster
		node       string
		seen       *desiredImages
	)

	BeforeAll(func(ctx SpecContext) {
		kubeconfig = e2eKubeconfig()
		c = newClient(kubeconfig)
		registrySecrets(ctx, c)
		var nodes []string
		sims, nodes, _ = simulatedNodes(ctx, kubeconfig, "gate", 1, map[string]string{gatePool: "true"})
		node = nodes[0]
		seen = watchDesiredImages(ctx, node)
		DeferCleanup(seen.stop)

		DeferCleanup(func(ctx SpecContext) {
			for _, obj := range []client.Object{
				&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: gatePool}},
				&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: gatePool}},
				&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: gatePool}},
			} {
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
			}
		})
		Expect(c.Create(ctx, &v1alpha1.MachineConfigPool{
			ObjectMeta: metav1.ObjectMeta{Name: gatePool},
			Spec: v1alpha1.MachineConfigPoolSpec{
				NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{gatePool: "true"}},
				MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{gatePool: "true"}},
				HealthCheckTimeout:    &metav1.Duration{Duration: 20 * time.Second},
			},
		})).To(Succeed())
	})

	AfterEach(func() {
		Expect(sims.Err()).NotTo(HaveOccurred(), "the simulated nodes failed behind the test's back")
	})

	It("holds the node until the image is approved, and never rolls out a rejected one", SpecTimeout(10*time.Minute), func(ctx SpecContext) {
		Expect(c.Create(ctx, gateConfig("one"))).To(Succeed())
		Expect(c.Create(ctx, &v1alpha1.MachineOSConfig{
			ObjectMeta: metav1.ObjectMeta{Name: gatePool},
			Spec: v1alpha1.MachineOSConfigSpec{
				MachineConfigPool:       v1alpha1.LocalObjectReference{Name: gatePool},
				ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
				BaseImagePullSpec:       registry + "/strata/os-base:latest",
				RenderedImagePushSecret: v1alpha1.SecretReference{Name: "e2e-push"},
				RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "e2e-pull"},
				RenderedImagePushSpec:   fmt.Sprintf("%s/strata/e2e-gate-%d:latest", registry, time.Now().Unix()),
				ImageApproval:           v1alpha1.ImageApprovalRequired,
			},
		})).To(Succeed())

		By("building the first image, which waits for approval")
		first := waitGateBuild(ctx, c, "")
		waitGateCondition(ctx, c, v1alpha1.ReasonAwaitingImageApproval, "stratactl approve "+first.Name)
		Expect(seen.has(first.Status.DigestedImagePushSpec)).To(BeFalse(), "the node was sent an image nobody approved")

		By("approving it with stratactl: the node updates")
		out, err := stratactl(ctx, "approve", first.Name, "--reason", "e2e scan clean")
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		waitNodesOn(ctx, c, []string{node}, first.Status.DigestedImagePushSpec)

		By("a second image, rejected with stratactl: it never reaches the node")
		update(ctx, c, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: gatePool}}, func(m *v1alpha1.MachineConfig) {
			m.Spec = gateConfig("two").Spec
		})
		second := waitGateBuild(ctx, c, first.Name)
		waitGateCondition(ctx, c, v1alpha1.ReasonAwaitingImageApproval, second.Name)
		out, err = stratactl(ctx, "reject", second.Name, "--reason", "e2e finding")
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		waitGateCondition(ctx, c, v1alpha1.ReasonImageRejected, "e2e finding")
		out, err = stratactl(ctx, "status", gatePool)
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(out).To(MatchRegexp(regexp.QuoteMeta(second.Name)+` \(Succeeded, \w+, rejected\)`), "stratactl status does not say the image is rejected")
		Eventually(func(g Gomega) {
			var events eventsv1.EventList
			g.Expect(c.List(ctx, &events)).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(
				HaveField("Regarding.Name", gatePool), HaveField("Reason", v1alpha1.ReasonImageRejected),
				HaveField("Type", corev1.EventTypeWarning), HaveField("Note", ContainSubstring("e2e finding")))))
		}).WithContext(ctx).WithTimeout(30*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "no ImageRejected Event on the pool")

		By("a third image, approved: the node skips the rejected one")
		update(ctx, c, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: gatePool}}, func(m *v1alpha1.MachineConfig) {
			m.Spec = gateConfig("three").Spec
		})
		third := waitGateBuild(ctx, c, second.Name)
		out, err = stratactl(ctx, "approve", third.Name)
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		waitNodesOn(ctx, c, []string{node}, third.Status.DigestedImagePushSpec)
		// The watch saw both approved images arrive: it was recording.
		Eventually(func() []string { return seen.list() }).WithContext(ctx).WithTimeout(30*time.Second).
			Should(ContainElements(first.Status.DigestedImagePushSpec, third.Status.DigestedImagePushSpec), "the watch missed the approved images")
		Expect(seen.has(second.Status.DigestedImagePushSpec)).To(BeFalse(), "the rejected image was sent to the node; desired images seen: %v", seen.list())
		Expect(os.ReadFile(filepath.Join(sims.Root(node), "etc", "strata-gate.conf"))).To(Equal([]byte("three")))
	})
})

func gateConfig(version string) *v1alpha1.MachineConfig {
	ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/strata-gate.conf","mode":420,"contents":{"source":"data:,%s"}}]}}`, version)
	return &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: gatePool, Labels: map[string]string{gatePool: "true"}},
		Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}},
	}
}

// waitGateBuild waits for the MachineOSConfig's current build, of the
// pool's current rendered config, to succeed, and for it not to be not.
func waitGateBuild(ctx context.Context, c client.Client, not string) *v1alpha1.MachineOSBuild {
	b := &v1alpha1.MachineOSBuild{}
	Eventually(func(g Gomega) {
		p := &v1alpha1.MachineConfigPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: gatePool}, p)).To(Succeed())
		m := &v1alpha1.MachineOSConfig{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: gatePool}, m)).To(Succeed())
		g.Expect(m.Status.MachineOSBuild).NotTo(BeNil())
		g.Expect(m.Status.MachineOSBuild.Name).NotTo(Equal(not))
		g.Expect(c.Get(ctx, client.ObjectKey{Name: m.Status.MachineOSBuild.Name}, b)).To(Succeed())
		if meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildFailed) {
			StopTrying(fmt.Sprintf("build %s failed: %+v", b.Name, b.Status.Failure)).Now()
		}
		g.Expect(b.Spec.MachineConfig.Name).To(Equal(p.Status.Configuration.Name))
		g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildSucceeded)).To(BeTrue())
	}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	return b
}

func waitGateCondition(ctx context.Context, c client.Client, reason, contains string) {
	Eventually(func(g Gomega) {
		p := &v1alpha1.MachineConfigPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: gatePool}, p)).To(Succeed())
		got := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PoolUpdated)
		g.Expect(got).NotTo(BeNil())
		g.Expect(got.Reason).To(Equal(reason), "%s", got.Message)
		g.Expect(got.Message).To(ContainSubstring(contains))
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// desiredImages records every desiredImage a node is ever given, from a
// watch that lasts the whole container (resumed from the last
// resourceVersion if the API server ends it), so that a test can say an
// image never reached it.
type desiredImages struct {
	mu     sync.Mutex
	seen   map[string]bool
	cancel context.CancelFunc
	done   chan struct{}
}

func watchDesiredImages(ctx context.Context, node string) *desiredImages {
	n, err := clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	// Ginkgo cancels a node's context when the node returns: the watch
	// must outlive the BeforeAll that starts it.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := watchtools.NewRetryWatcherWithContext(wctx, n.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = "metadata.name=" + node
			return clientset.CoreV1().Nodes().Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
	}
	Expect(err).NotTo(HaveOccurred())
	d := &desiredImages{seen: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	d.record(n)
	go func() {
		defer close(d.done)
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				d.record(n)
			}
		}
	}()
	return d
}

func (d *desiredImages) record(n *corev1.Node) {
	if img := n.Annotations[v1alpha1.DesiredImageAnnotation]; img != "" {
		d.mu.Lock()
		d.seen[img] = true
		d.mu.Unlock()
	}
}

// has says whether the node was ever given img. It fails the spec if the
// watch has ended: "never" would then mean nothing.
func (d *desiredImages) has(img string) bool {
	select {
	case <-d.done:
		Fail("the watch on the node's desired image ended before the spec did")
	default:
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen[img]
}

func (d *desiredImages) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for k := range d.seen {
		out = append(out, k)
	}
	return out
}

func (d *desiredImages) stop() {
	d.cancel()
	<-d.done
}
