//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/simnode"
)

// Disruption end to end (issue 21): the real controller builds each
// change, the real daemons on two simulated nodes (one per simulated bootc
// release: 1.16.9, whose switch has no --download-only, and main) decide
// what it costs them from the `cluster` MachineConfiguration and the
// images' layers, the real drain runs when they ask for it, and bootc-sim
// deploys into each node's real ostree sysroot. The specs build on each
// other's images, so they share the nodes: each is one change.
const (
	disruptionPool = "e2e-disruption"
	disruptionMC   = "50-e2e-disruption"
	// disruptionLiveFile has a Restart policy; disruptionOtherFile none.
	disruptionLiveFile  = "/etc/strata-e2e-live.conf"
	disruptionOtherFile = "/etc/strata-e2e-other.conf"
	disruptionService   = "strata-e2e-live.service"
)

var _ = Describe("Disruption", Ordered, func() {
	var (
		c       client.Client
		sims    = map[string]*simnode.Cluster{}
		release = map[string]bootcsim.Version{}
		nodes   []string
		ns      string
		images  []string // every image the pool got, in order
	)
	// last is the pool's image now.
	last := func() string { return images[len(images)-1] }
	// roll changes the pool's MachineConfig and waits for the new image.
	roll := func(ctx context.Context, live, other string, kargs ...string) string {
		update(ctx, c, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: disruptionMC}}, func(mc *v1alpha1.MachineConfig) {
			mc.Spec = disruptionConfig(live, other, kargs...).Spec
		})
		image := waitImageOf(ctx, c, disruptionPool, disruptionPool, last())
		images = append(images, image)
		return image
	}
	counts := func() map[string]nodeCounts {
		m := map[string]nodeCounts{}
		for _, n := range nodes {
			m[n] = countsOf(sims[n], n)
		}
		return m
	}

	BeforeAll(func(ctx SpecContext) {
		kubeconfig := e2eKubeconfig()
		c = newClient(kubeconfig)
		registrySecrets(ctx, c)
		labels := map[string]string{disruptionPool: "true"}
		for _, v := range []bootcsim.Version{bootcsim.VersionMain, bootcsim.Version116} {
			By("a simulated node on bootc " + string(v))
			s, added, _ := simulatedNodesOn(ctx, kubeconfig, "disrupt", 1, labels, v)
			for _, n := range added {
				sims[n], release[n] = s, v
			}
			nodes = append(nodes, added...)
		}
		DeferCleanup(func(ctx SpecContext) {
			for _, obj := range []client.Object{
				&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: disruptionPool}},
				&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: disruptionMC}},
				&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: disruptionPool}},
				&v1alpha1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.MachineConfigurationName}},
			} {
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
			}
		})
		Expect(c.Create(ctx, &v1alpha1.MachineConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.MachineConfigurationName},
			Spec: v1alpha1.MachineConfigurationSpec{NodeDisruptionPolicy: v1alpha1.NodeDisruptionPolicyConfig{
				Files: []v1alpha1.NodeDisruptionPolicyFile{{Path: disruptionLiveFile, Actions: []v1alpha1.NodeDisruptionPolicyAction{
					{Type: v1alpha1.RestartAction, Restart: &v1alpha1.NodeDisruptionPolicyService{ServiceName: disruptionService}},
				}}},
			}},
		})).To(Succeed())
		Expect(c.Create(ctx, &v1alpha1.MachineConfigPool{
			ObjectMeta: metav1.ObjectMeta{Name: disruptionPool},
			Spec: v1alpha1.MachineConfigPoolSpec{
				NodeSelector:          &metav1.LabelSelector{MatchLabels: labels},
				MachineConfigSelector: &metav1.LabelSelector{MatchLabels: labels},
				MaxUnavailable:        ptr.To(intstr.FromInt32(2)),
				HealthCheckTimeout:    &metav1.Duration{Duration: 30 * time.Second},
				DrainTimeout:          &metav1.Duration{Duration: 10 * time.Minute},
			},
		})).To(Succeed())
		Expect(c.Create(ctx, disruptionConfig("1", "1"))).To(Succeed())
		Expect(c.Create(ctx, disruptionMOSC(registry+"/strata/os-base:latest"))).To(Succeed())
		By("the first image: a full reboot from the original, which has no configuration layer")
		images = append(images, waitImageOf(ctx, c, disruptionPool, disruptionPool, ""))
		waitNodesOn(ctx, c, nodes, last())
		for _, n := range nodes {
			Expect(getNode(ctx, c, n).Annotations[v1alpha1.DisruptionAnnotation]).To(HavePrefix("Reboot: "), "node %s", n)
		}

		By("a workload pod on each node, to see what is evicted")
		ns = newNamespace(ctx)
		for _, n := range nodes {
			runPodOn(ctx, c, ns, "app-"+n, n, nil)
		}
	})

	AfterEach(func() {
		for _, n := range nodes {
			Expect(sims[n].Err()).NotTo(HaveOccurred(), "the simulated nodes failed behind the test's back")
		}
	})

	It("restarts a service for a file under a Restart policy: no drain, no eviction, no reboot; a later boot keeps no local modification", SpecTimeout(5*time.Minute), func(ctx SpecContext) {
		before, booted := counts(), last()
		uids := podUIDs(ctx, ns)
		cordons := watchCordons(ctx, disruptionPool)
		image := roll(ctx, "2", "1")
		waitNodesOn(ctx, c, nodes, image)
		Expect(cordons.stop()).To(BeEmpty(), "nodes cordoned during a live apply")
		Expect(podUIDs(ctx, ns)).To(Equal(uids), "pods evicted or replaced during a live apply")
		for _, n := range nodes {
			a := getNode(ctx, c, n).Annotations
			expectDecision(ctx, n, a, "Live: ", "")
			Expect(countsOf(sims[n], n)).To(Equal(before[n]), "node %s rebooted", n)
			Expect(a[v1alpha1.DesiredDrainAnnotation]).To(HavePrefix(v1alpha1.UncordonRequestPrefix), "node %s asked for a drain", n)
			Expect(a[v1alpha1.CurrentConfigAnnotation]).To(Equal(a[v1alpha1.DesiredConfigAnnotation]), "node %s config", n)
			Expect(a[v1alpha1.BootedImageAnnotation]).To(Equal(booted), "node %s bootedImage", n)
			h := simStatus(ctx, sims[n], n)
			Expect(h.Status.Booted.Digest()).To(Equal(digestOf(booted)), "node %s booted", n)
			Expect(h.Status.Staged).NotTo(BeNil(), "node %s staged nothing", n)
			Expect(h.Status.Staged.Digest()).To(Equal(digestOf(image)), "node %s staged", n)
			Expect(h.Status.Staged.DownloadOnly).To(BeFalse(), "node %s: the staged image must boot on any later boot", n)
			root := sims[n].Root(n)
			Expect(os.ReadFile(filepath.Join(root, disruptionLiveFile))).To(Equal([]byte("2")), "node %s live file", n)
			Expect(os.ReadFile(filepath.Join(root, simnode.SystemctlLog))).To(ContainSubstring("restart "+disruptionService), "node %s systemctl calls", n)
		}

		By("a reboot nobody asked for boots the staged image, whose /etc holds no local modification")
		for _, n := range nodes {
			Expect(sims[n].RebootUnplanned(ctx, n)).To(Succeed())
			h := simStatus(ctx, sims[n], n)
			Expect(h.Status.Booted.Digest()).To(Equal(digestOf(image)), "node %s booted", n)
			Expect(h.Status.Staged).To(BeNil(), "node %s staged", n)
			diff := configDiff(ctx, sims[n].Root(n))
			Expect(diff).NotTo(HaveKey(disruptionLiveFile), "node %s: the live apply left a local modification", n)
			Expect(os.ReadFile(filepath.Join(sims[n].Root(n), disruptionLiveFile))).To(Equal([]byte("2")), "node %s live file", n)
		}
	})

	It("reboots fully for a kernel argument, and the next image's version of the live-applied file takes effect", SpecTimeout(5*time.Minute), func(ctx SpecContext) {
		before := counts()
		image := roll(ctx, "3", "1", "strata.e2e=3")
		waitNodesOn(ctx, c, nodes, image)
		for _, n := range nodes {
			a := getNode(ctx, c, n).Annotations
			expectDecision(ctx, n, a, "Reboot: ", "kernel argument")
			got := countsOf(sims[n], n)
			Expect(got.reboots).To(Equal(before[n].reboots+1), "node %s full reboots", n)
			Expect(got.softReboots).To(Equal(before[n].softReboots), "node %s soft reboots", n)
			Expect(got.bootID).NotTo(Equal(before[n].bootID), "node %s boot id", n)
			root := sims[n].Root(n)
			Expect(os.ReadFile(filepath.Join(root, disruptionLiveFile))).To(Equal([]byte("3")), "node %s: the image's file lost to the live-applied one", n)
			Expect(configDiff(ctx, root)).NotTo(HaveKey(disruptionLiveFile), "node %s", n)
			kargs, err := sims[n].Sim(ctx, n, "sim", "kargs")
			Expect(err).NotTo(HaveOccurred())
			Expect(string(kargs)).To(ContainSubstring("strata.e2e=3"), "node %s kargs", n)
		}
	})

	It("soft-reboots for a change no policy names, on a base that can", SpecTimeout(5*time.Minute), func(ctx SpecContext) {
		before := counts()
		uids := podUIDs(ctx, ns)
		image := roll(ctx, "3", "2", "strata.e2e=3")
		waitNodesOn(ctx, c, nodes, image)
		for _, n := range nodes {
			a := getNode(ctx, c, n).Annotations
			expectDecision(ctx, n, a, "SoftReboot: ", "")
			got := countsOf(sims[n], n)
			Expect(got.reboots).To(Equal(before[n].reboots), "node %s full reboots", n)
			Expect(got.softReboots).To(Equal(before[n].softReboots+1), "node %s soft reboots", n)
			Expect(got.bootID).To(Equal(before[n].bootID), "node %s boot id", n)
			Expect(simStatus(ctx, sims[n], n).Status.Booted.Digest()).To(Equal(digestOf(image)), "node %s booted", n)
			Expect(os.ReadFile(filepath.Join(sims[n].Root(n), disruptionOtherFile))).To(Equal([]byte("2")), "node %s", n)
		}
		Eventually(func(g Gomega) {
			for name := range uids {
				err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod %s was not evicted: %v", name, err)
			}
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	})

	It("keeps a staged image locked: a node rebooted or crashed between staging and drain boots its current image, then updates", SpecTimeout(6*time.Minute), func(ctx SpecContext) {
		current := last()
		By("a budget on each node that holds its drain")
		held := newNamespace(ctx)
		for _, n := range nodes {
			app := map[string]string{"app": "held-" + n}
			Expect(c.Create(ctx, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Namespace: held, Name: "held-" + n},
				Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: app}},
			})).To(Succeed())
			runPodOn(ctx, c, held, "held-"+n, n, app)
		}
		before := counts()
		image := roll(ctx, "3", "3", "strata.e2e=3")
		// adopted: nodes whose unplanned reboot booted the update.
		adopted := map[string]bool{}
		for _, n := range nodes {
			By(fmt.Sprintf("node %s on bootc %s: a clean reboot nobody asked for, then a crash", n, release[n]))
			waitLockedStage(ctx, c, sims[n], n, image)
			Expect(sims[n].RebootUnplanned(ctx, n)).To(Succeed())
			if booted := simStatus(ctx, sims[n], n).Status.Booted.Digest(); booted == digestOf(image) {
				// Only a release without locked staging may boot the
				// update unasked; the daemon must then say so and gate it.
				Expect(release[n]).To(Equal(bootcsim.Version116), "node %s on bootc %s booted the locked update", n, release[n])
				Eventually(func(g Gomega) {
					g.Expect(nodeEvents(ctx, n, "BootedWithoutDrain")).NotTo(BeEmpty())
				}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
				adopted[n] = true
				continue
			}
			Expect(simStatus(ctx, sims[n], n).Status.Booted.Digest()).To(Equal(digestOf(current)), "node %s after the unplanned reboot", n)
			waitLockedStage(ctx, c, sims[n], n, image)
			Expect(sims[n].Crash(ctx, n)).To(Succeed())
			Expect(simStatus(ctx, sims[n], n).Status.Booted.Digest()).To(Equal(digestOf(current)), "node %s after the crash", n)
			Expect(getNode(ctx, c, n).Annotations[v1alpha1.CurrentImageAnnotation]).To(Equal(current), "node %s", n)
		}

		By("relaxing the budgets: the update completes as usual")
		for _, n := range nodes {
			update(ctx, c, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: held, Name: "held-" + n}}, func(pdb *policyv1.PodDisruptionBudget) {
				pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(0))
			})
		}
		waitNodesOn(ctx, c, nodes, image)
		for _, n := range nodes {
			a := getNode(ctx, c, n).Annotations
			expectDecision(ctx, n, a, "SoftReboot: ", "")
			got := countsOf(sims[n], n)
			if adopted[n] {
				Expect(got.reboots).To(Equal(before[n].reboots+1), "node %s: the unplanned reboot, no more", n)
				Expect(got.softReboots).To(Equal(before[n].softReboots), "node %s", n)
			} else {
				Expect(got.reboots).To(Equal(before[n].reboots+2), "node %s: the unplanned reboot and the crash, no reboot of Strata's", n)
				Expect(got.softReboots).To(Equal(before[n].softReboots+1), "node %s: the update's soft reboot", n)
			}
			Expect(simStatus(ctx, sims[n], n).Status.Booted.Digest()).To(Equal(digestOf(image)), "node %s booted", n)
			Expect(os.ReadFile(filepath.Join(sims[n].Root(n), disruptionOtherFile))).To(Equal([]byte("3")), "node %s", n)
		}
	})

	It("reboots fully for a change no policy names on a base whose systemd cannot soft-reboot", SpecTimeout(6*time.Minute), func(ctx SpecContext) {
		By("a base like the test OS whose systemd has no soft-reboot")
		base := baseWithoutSoftReboot(ctx)
		update(ctx, c, &v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: disruptionPool}}, func(m *v1alpha1.MachineOSConfig) {
			m.Spec.BaseImagePullSpec = base
		})
		images = append(images, waitImageOf(ctx, c, disruptionPool, disruptionPool, last()))
		waitNodesOn(ctx, c, nodes, last())
		for _, n := range nodes {
			expectDecision(ctx, n, getNode(ctx, c, n).Annotations, "Reboot: ", "below its configuration layer")
		}

		before := counts()
		image := roll(ctx, "3", "4", "strata.e2e=3")
		waitNodesOn(ctx, c, nodes, image)
		for _, n := range nodes {
			expectDecision(ctx, n, getNode(ctx, c, n).Annotations, "Reboot: ", "not soft-reboot capable")
			got := countsOf(sims[n], n)
			Expect(got.reboots).To(Equal(before[n].reboots+1), "node %s full reboots", n)
			Expect(got.bootID).NotTo(Equal(before[n].bootID), "node %s boot id", n)
			Expect(os.ReadFile(filepath.Join(sims[n].Root(n), disruptionOtherFile))).To(Equal([]byte("4")), "node %s", n)
		}
	})
})

// disruptionConfig is the pool's MachineConfig: the file under the
// Restart policy, a file no policy names, kernel arguments.
func disruptionConfig(live, other string, kargs ...string) *v1alpha1.MachineConfig {
	ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[
		{"path":%q,"mode":420,"contents":{"source":"data:,%s"}},
		{"path":%q,"mode":420,"contents":{"source":"data:,%s"}}]}}`, disruptionLiveFile, live, disruptionOtherFile, other)
	return &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: disruptionMC, Labels: map[string]string{disruptionPool: "true"}},
		Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}, KernelArguments: kargs},
	}
}

func disruptionMOSC(base string) *v1alpha1.MachineOSConfig {
	return &v1alpha1.MachineOSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: disruptionPool},
		Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: disruptionPool},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
			BaseImagePullSpec:       base,
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: "e2e-push"},
			RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "e2e-pull"},
			RenderedImagePushSpec:   fmt.Sprintf("%s/strata/e2e-disruption-%d:latest", registry, time.Now().Unix()),
		},
	}
}

// expectDecision checks the node's disruption annotation and its Event:
// the decision kind (as the annotation's prefix) and, when not empty, a
// word of the reason.
func expectDecision(ctx context.Context, n string, a map[string]string, kind, reason string) {
	GinkgoHelper()
	got := a[v1alpha1.DisruptionAnnotation]
	Expect(got).To(HavePrefix(kind), "node %s disruption", n)
	Expect(strings.ToLower(got)).To(ContainSubstring(strings.ToLower(reason)), "node %s disruption reason", n)
	Eventually(func(g Gomega) {
		g.Expect(nodeEvents(ctx, n, "Disruption")).To(ContainElement(got), "node %s: no Disruption Event saying %q", n, got)
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
}

// nodeEvents returns the messages of the node's Events with reason.
func nodeEvents(ctx context.Context, node, reason string) []string {
	GinkgoHelper()
	evs, err := clientset.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.kind", "Node"),
		fields.OneTermEqualSelector("involvedObject.name", node),
		fields.OneTermEqualSelector("reason", reason),
	).String()})
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range evs.Items {
		out = append(out, e.Message)
	}
	return out
}

// nodeCounts are what a node went through, by the harness's count.
type nodeCounts struct {
	reboots, softReboots int
	bootID               string
}

func countsOf(s *simnode.Cluster, n string) nodeCounts {
	GinkgoHelper()
	id, err := os.ReadFile(filepath.Join(s.Root(n), ".bootc-sim", "boot_id"))
	Expect(err).NotTo(HaveOccurred())
	return nodeCounts{reboots: s.Reboots(n), softReboots: s.SoftReboots(n), bootID: strings.TrimSpace(string(id))}
}

func simStatus(ctx context.Context, s *simnode.Cluster, n string) *bootc.Host {
	GinkgoHelper()
	out, err := s.Sim(ctx, n, "status", "--format=json")
	Expect(err).NotTo(HaveOccurred())
	h := &bootc.Host{}
	Expect(json.Unmarshal(out, h)).To(Succeed())
	Expect(h.Status.Booted).NotTo(BeNil(), "node %s has no booted deployment", n)
	return h
}

func digestOf(image string) string {
	_, d, _ := strings.Cut(image, "@")
	return d
}

// waitLockedStage waits until the node's daemon has staged image locked
// (download-only), decided and asked for its drain, which the budget
// holds: the window between staging and drain.
func waitLockedStage(ctx context.Context, c client.Client, s *simnode.Cluster, n, image string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		a := getNode(ctx, c, n).Annotations
		g.Expect(a[v1alpha1.DesiredImageAnnotation]).To(Equal(image), "node %s desired image", n)
		drain := v1alpha1.DrainRequestPrefix + v1alpha1.UpdateKey(image, a[v1alpha1.DesiredConfigAnnotation])
		g.Expect(a[v1alpha1.DesiredDrainAnnotation]).To(Equal(drain), "node %s drain request", n)
		g.Expect(a[v1alpha1.LastAppliedDrainAnnotation]).NotTo(Equal(drain), "node %s was drained", n)
		out, err := s.Sim(ctx, n, "status", "--format=json")
		g.Expect(err).NotTo(HaveOccurred())
		h := &bootc.Host{}
		g.Expect(json.Unmarshal(out, h)).To(Succeed())
		g.Expect(h.Status.Staged.Digest()).To(Equal(digestOf(image)), "node %s staged", n)
		g.Expect(h.Status.Staged.DownloadOnly).To(BeTrue(), "node %s: the staged update is not locked", n)
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// configDiff runs `ostree admin config-diff` on the node's sysroot (with
// nothing staged, the stateroot's first deployment is the booted one)
// and returns its entries by host path.
func configDiff(ctx context.Context, root string) map[string]string {
	GinkgoHelper()
	out, err := exec.CommandContext(ctx, "ostree", "admin", "config-diff", "--sysroot="+filepath.Join(root, "sysroot"), "--os=strata").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "ostree admin config-diff: %s", out)
	diff := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			diff["/etc/"+strings.TrimPrefix(f[1], "/")] = f[0]
		}
	}
	GinkgoWriter.Printf("config-diff of %s:\n%s", root, out)
	return diff
}

// runPodOn runs a pod bound to the node and waits until kwok runs it.
func runPodOn(ctx context.Context, c client.Client, ns, name, node string, labels map[string]string) {
	GinkgoHelper()
	Expect(c.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Tolerations: []corev1.Toleration{{Key: simnode.SimulatedTaint, Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "app", Image: registry + "/strata/busybox:latest"}},
		},
	})).To(Succeed())
	Eventually(func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
}

// podUIDs returns the namespace's pods' UIDs by name.
func podUIDs(ctx context.Context, ns string) map[string]k8stypes.UID {
	GinkgoHelper()
	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	m := map[string]k8stypes.UID{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			m[p.Name] = p.UID
		}
	}
	return m
}

// cordonWatch records the nodes of a label it saw cordoned.
type cordonWatch struct {
	mu     sync.Mutex
	seen   map[string]bool
	cancel context.CancelFunc
	done   chan struct{}
}

func watchCordons(ctx context.Context, label string) *cordonWatch {
	GinkgoHelper()
	w := &cordonWatch{seen: map[string]bool{}, done: make(chan struct{})}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	events, err := clientset.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{LabelSelector: label + "=true"})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer close(w.done)
		for ev := range events.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted && n.Spec.Unschedulable {
				w.mu.Lock()
				w.seen[n.Name] = true
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// stop ends the watch and returns the nodes it saw cordoned.
func (w *cordonWatch) stop() []string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for n := range w.seen {
		out = append(out, n)
	}
	return out
}

// baseWithoutSoftReboot pushes the test OS base plus bootc-sim's
// NoSoftRebootFile (a systemd without soft-reboot) and returns it by
// digest.
func baseWithoutSoftReboot(ctx context.Context) string {
	GinkgoHelper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	file := strings.TrimPrefix(bootcsim.NoSoftRebootFile, "/")
	// The directories, parents first.
	var dirs []string
	for dir := path.Dir(file); dir != "."; dir = path.Dir(dir) {
		dirs = append([]string{dir}, dirs...)
	}
	for _, d := range dirs {
		Expect(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755})).To(Succeed())
	}
	Expect(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: file, Mode: 0o644})).To(Succeed())
	Expect(tw.Close()).To(Succeed())

	return pushOnBase(ctx, "os-base-nosoft", "e2e: a systemd without soft-reboot", buf.Bytes())
}

// pushOnBase pushes the test OS base with one more layer (a tar), under
// strata/<repo>:<unix time>, and returns it by digest.
func pushOnBase(ctx context.Context, repo, createdBy string, layerTar []byte) string {
	base, err := name.ParseReference(registry+"/strata/os-base:latest", name.Insecure)
	Expect(err).NotTo(HaveOccurred())
	img, err := remote.Image(base, remote.WithContext(ctx))
	Expect(err).NotTo(HaveOccurred())
	mt, err := img.MediaType()
	Expect(err).NotTo(HaveOccurred())
	// The layer's media type follows the manifest's, as a builder's would.
	lt := types.DockerLayer
	if mt == types.OCIManifestSchema1 {
		lt = types.OCILayer
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil }, tarball.WithMediaType(lt))
	Expect(err).NotTo(HaveOccurred())
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: lt, History: v1.History{CreatedBy: createdBy}})
	Expect(err).NotTo(HaveOccurred())
	tag, err := name.ParseReference(fmt.Sprintf("%s/strata/%s:%d", registry, repo, time.Now().Unix()), name.Insecure)
	Expect(err).NotTo(HaveOccurred())
	Expect(remote.Write(tag, img, remote.WithContext(ctx))).To(Succeed())
	d, err := img.Digest()
	Expect(err).NotTo(HaveOccurred())
	return tag.Context().Name() + "@" + d.String()
}
