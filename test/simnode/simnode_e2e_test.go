//go:build e2e

package simnode_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/strata-dev/strata/test/simnode"
)

// The harness against the live test cluster (make cluster-up), with
// stand-ins for strata-daemon and bootc-sim: what is tested here is kwok's
// part and the harness's, not the daemon's.

func TestSimnode(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "simnode harness suite")
}

// fakeBootcSim does what the harness needs of bootc-sim: sim init (a root
// with an immutable deployment, as ostree leaves it), sim reboot and sim
// crash (a new boot id), sim soft-reboot (the same), sim request-reboot
// and the systemctl's reboot.
const fakeBootcSim = `#!/bin/bash
set -eu
root=${BOOTC_SIM_ROOT:?}
newboot() { cat /proc/sys/kernel/random/uuid >"$root/.bootc-sim/boot_id"; }
case "$1 ${2:-}" in
"sim init")
	d=$root/sysroot/ostree/deploy/strata/deploy/0123abcd.0
	mkdir -p "$root/.bootc-sim" "$d/etc"
	echo "$3" >"$root/.bootc-sim/image"
	chattr +i "$d"
	newboot ;;
"sim reboot"|"sim crash") newboot ;;
"sim soft-reboot") ;;
"sim request-reboot") touch "$root/.bootc-sim/reboot-requested" ;;
"sim systemctl") [[ ${3:-} == reboot ]] && touch "$root/.bootc-sim/reboot-requested" ;;
*) echo "fake bootc-sim: $*" >&2; exit 2 ;;
esac
`

// fakeDaemon logs its boot id and, when the test leaves a file
// want-reboot in its root, runs its reboot command and waits to be
// killed, as strata-daemon does.
const fakeDaemon = `#!/bin/bash
set -eu
while (($#)); do
	case $1 in
	--host-root) root=$2 ;;
	--reboot-command) reboot=$2 ;;
	--boot-id-file) bootid=$2 ;;
	esac
	shift 2
done
echo "started on $NODE_NAME boot $(cat "$bootid") root $BOOTC_SIM_ROOT"
until [[ -e $root/want-reboot ]]; do sleep 0.05; done
rm "$root/want-reboot"
echo "rebooting"
$reboot
exec sleep 1000
`

var _ = Describe("Simulated nodes", Ordered, func() {
	var (
		sim    *simnode.Cluster
		cs     kubernetes.Interface
		nodes  []string
		ns     string
		tmpDir string
	)

	BeforeAll(func(ctx SpecContext) {
		kubeconfig := os.Getenv("KUBECONFIG")
		if kubeconfig == "" {
			kubeconfig = filepath.Join("..", "..", ".infra", "cluster", "kubeconfig")
		}
		tmpDir = GinkgoT().TempDir()
		bin := filepath.Join(tmpDir, "bin")
		Expect(os.Mkdir(bin, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(bin, "bootc-sim"), []byte(fakeBootcSim), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(bin, "strata-daemon"), []byte(fakeDaemon), 0o755)).To(Succeed())

		var err error
		sim, err = simnode.New(ctx, simnode.Config{
			Kubeconfig:    kubeconfig,
			Daemon:        filepath.Join(bin, "strata-daemon"),
			BootcSim:      filepath.Join(bin, "bootc-sim"),
			OriginalImage: "127.0.0.1:5000/strata/os-base@sha256:0000000000000000000000000000000000000000000000000000000000000000",
			Dir:           filepath.Join(tmpDir, "nodes"),
			Log:           GinkgoWriter,
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(sim.Stop(ctx)).To(Succeed())
			for _, n := range nodes {
				_, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
				Expect(apierrors.IsNotFound(err)).To(BeTrue(), "node %s after Stop: %v", n, err)
			}
			Expect(filepath.Join(tmpDir, "nodes", nodes[0])).NotTo(BeAnExistingFile())
		})
		cs = sim.Client()

		start := time.Now()
		nodes, err = sim.AddNodes(ctx, 3, map[string]string{"simnode-test": "yes"})
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("3 nodes Ready and schedulable in %s\n", time.Since(start))

		n, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "simnode-"},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		ns = n.Name
		DeferCleanup(func(ctx SpecContext) {
			Expect(cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})).To(Succeed())
		})
		Eventually(func(ctx context.Context) error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	AfterEach(func() {
		Expect(sim.Err()).NotTo(HaveOccurred())
	})

	It("registers Ready, tainted worker nodes with kwok's leases and running daemons", func(ctx SpecContext) {
		Expect(nodes).To(HaveLen(3))
		for _, name := range nodes {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(n.Labels).To(HaveKeyWithValue(simnode.SimulatedLabel, "true"))
			Expect(n.Labels).To(HaveKeyWithValue(simnode.WorkerRoleLabel, ""))
			Expect(n.Labels).To(HaveKeyWithValue("simnode-test", "yes"))
			Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelHostname, name))
			Expect(n.Spec.Taints).To(ConsistOf(corev1.Taint{Key: simnode.SimulatedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}))
			Expect(n.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
			bootID, err := os.ReadFile(filepath.Join(sim.Root(name), ".bootc-sim/boot_id"))
			Expect(err).NotTo(HaveOccurred())
			Expect(n.Status.NodeInfo.BootID).To(Equal(strings.TrimSpace(string(bootID))))

			var lease *coordinationv1.Lease
			Eventually(func(ctx context.Context) (err error) {
				lease, err = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
				return err
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
			Expect(lease.Spec.RenewTime.Time).To(BeTemporally("~", time.Now(), 20*time.Second))

			Expect(sim.DaemonRunning(name)).To(BeTrue())
			Eventually(func() string { return sim.DaemonLog(name) }).WithTimeout(10 * time.Second).
				Should(ContainSubstring("started on " + name + " boot " + strings.TrimSpace(string(bootID))))
		}
	})

	It("runs pods that tolerate the taint, and evicts them as the budget allows", func(ctx SpecContext) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"simnode-test": "yes"},
				Tolerations:  []corev1.Toleration{{Key: simnode.SimulatedTaint, Operator: corev1.TolerationOpExists}},
				Containers:   []corev1.Container{{Name: "web", Image: "127.0.0.1:5000/strata/busybox:latest"}},
			},
		}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(ctx context.Context) (*corev1.Pod, error) {
			return cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(And(
			HaveField("Spec.NodeName", BeElementOf(nodes)),
			HaveField("Status.Phase", corev1.PodRunning)))

		one := intstr.FromInt32(1)
		_, err = cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: &one,
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(ctx context.Context) (*policyv1.PodDisruptionBudget, error) {
			return cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(And(
			HaveField("Status.ObservedGeneration", BeNumerically(">=", 1)),
			HaveField("Status.CurrentHealthy", int32(1)),
			HaveField("Status.DisruptionsAllowed", int32(0))))

		evict := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
		err = cs.CoreV1().Pods(ns).EvictV1(ctx, evict)
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "eviction against the budget: %v", err)

		Expect(cs.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "web", metav1.DeleteOptions{})).To(Succeed())
		Expect(cs.CoreV1().Pods(ns).EvictV1(ctx, evict)).To(Succeed())
		Eventually(func(ctx context.Context) bool {
			_, err := cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(BeTrue(), "kwok deletes the evicted pod")
	})

	It("reboots a node when its daemon asks: daemon killed, NotReady, new boot, Ready, daemon again", func(ctx SpecContext) {
		name := nodes[0]
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "stays"},
			Spec: corev1.PodSpec{
				NodeName:    name,
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "stays", Image: "127.0.0.1:5000/strata/busybox:latest"}},
			},
		}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(ctx context.Context) (*corev1.Pod, error) {
			return cs.CoreV1().Pods(ns).Get(ctx, "stays", metav1.GetOptions{})
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(HaveField("Status.Phase", corev1.PodRunning))

		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		oldBoot := n.Status.NodeInfo.BootID
		w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: n.ResourceVersion,
		})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()

		start := time.Now()
		Expect(os.WriteFile(filepath.Join(sim.Root(name), "want-reboot"), nil, 0o644)).To(Succeed())
		Eventually(sim.Reboots).WithArguments(name).WithTimeout(time.Minute).Should(Equal(1))
		GinkgoWriter.Printf("reboot of %s took %s from request to daemon restarted\n", name, time.Since(start))

		// The watch saw NotReady, then Ready with the new boot id.
		seen := []string{"True"}
		var newBoot string
		Eventually(w.ResultChan()).WithTimeout(10 * time.Second).Should(Receive(Satisfy(func(ev watch.Event) bool {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				return false
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && seen[len(seen)-1] != string(c.Status) {
					seen = append(seen, string(c.Status))
				}
			}
			newBoot = n.Status.NodeInfo.BootID
			return len(seen) >= 3
		})))
		Expect(seen).To(Equal([]string{"True", "False", "True"}))
		Expect(newBoot).NotTo(Equal(oldBoot))

		Expect(sim.Reboots(nodes[1])).To(Equal(0))
		Expect(filepath.Join(sim.Root(name), ".bootc-sim/reboot-requested")).NotTo(BeAnExistingFile())
		Expect(sim.DaemonRunning(name)).To(BeTrue())
		Eventually(func() string { return sim.DaemonLog(name) }).WithTimeout(10 * time.Second).
			Should(ContainSubstring("started on " + name + " boot " + newBoot))

		Eventually(func(ctx context.Context) (*corev1.Pod, error) {
			return cs.CoreV1().Pods(ns).Get(ctx, "stays", metav1.GetOptions{})
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(And(
			HaveField("Status.Phase", corev1.PodRunning),
			HaveField("Status.Conditions", ContainElement(And(
				HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))))
	})

	It("kills and restarts a daemon on demand", func(ctx SpecContext) {
		name := nodes[1]
		Expect(sim.KillDaemon(name)).To(Succeed())
		Expect(sim.DaemonRunning(name)).To(BeFalse())
		Expect(sim.StartDaemon(name)).To(Succeed())
		Expect(sim.DaemonRunning(name)).To(BeTrue())
		Eventually(func() int { return strings.Count(sim.DaemonLog(name), "started on "+name) }).
			WithTimeout(10 * time.Second).Should(Equal(2))
	})

	It("makes a node NotReady and Ready on demand", func(ctx SpecContext) {
		name := nodes[2]
		start := time.Now()
		Expect(sim.SetReady(ctx, name, false)).To(Succeed())
		notReady := time.Since(start)
		Expect(sim.SetReady(ctx, name, true)).To(Succeed())
		GinkgoWriter.Printf("NotReady seen in %s, Ready again in %s\n", notReady, time.Since(start)-notReady)
	})
})
