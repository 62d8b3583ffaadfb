//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout/bootcheck"
	"github.com/strata-dev/strata/test/simnode"
)

const bootCheckPool = "e2e-bootcheck"

// The boot check end to end (issue 20 point 9): an image that breaks the
// kubelet, so that no daemon ever runs on it, is rolled back by the boot
// check every Strata image carries, without the cluster; the daemon, back
// on the previous image, reports why, and the rollout halts.
var _ = Describe("The boot check", Ordered, func() {
	var (
		c        client.Client
		sims     *simnode.Cluster
		nodes    []string
		original string
	)

	BeforeAll(func(ctx SpecContext) {
		kubeconfig := e2eKubeconfig()
		c = newClient(kubeconfig)
		registrySecrets(ctx, c)
		sims, nodes, original = simulatedNodes(ctx, kubeconfig, "bootcheck", 2, map[string]string{bootCheckPool: "true"})
		DeferCleanup(func(ctx SpecContext) {
			for _, obj := range []client.Object{
				&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: bootCheckPool}},
				&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: bootCheckPool}},
				&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: bootCheckPool}},
			} {
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
			}
		})
		Expect(c.Create(ctx, &v1alpha1.MachineConfigPool{
			ObjectMeta: metav1.ObjectMeta{Name: bootCheckPool},
			Spec: v1alpha1.MachineConfigPoolSpec{
				NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{bootCheckPool: "true"}},
				MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{bootCheckPool: "true"}},
				MaxUnavailable:        ptr.To(intstr.FromInt32(1)),
				HealthCheckTimeout:    &metav1.Duration{Duration: 15 * time.Second},
			},
		})).To(Succeed())
	})

	AfterEach(func() {
		Expect(sims.Err()).NotTo(HaveOccurred(), "the simulated nodes failed behind the test's back")
	})

	It("rolls back on the node an image whose daemon never starts, reports why, and halts", SpecTimeout(12*time.Minute), func(ctx SpecContext) {
		By("an image that breaks the kubelet: its node stays NotReady and no daemon runs")
		ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[
			{"path":"/etc/strata-bootcheck.conf","mode":420,"contents":{"source":"data:,broken"}},
			{"path":%q,"mode":420,"contents":{"source":"data:,the%%20kubelet%%20fails"}}]}}`, simnode.KubeletBrokenFile)
		Expect(c.Create(ctx, &v1alpha1.MachineConfig{
			ObjectMeta: metav1.ObjectMeta{Name: bootCheckPool, Labels: map[string]string{bootCheckPool: "true"}},
			Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}},
		})).To(Succeed())
		Expect(c.Create(ctx, &v1alpha1.MachineOSConfig{
			ObjectMeta: metav1.ObjectMeta{Name: bootCheckPool},
			Spec: v1alpha1.MachineOSConfigSpec{
				MachineConfigPool:       v1alpha1.LocalObjectReference{Name: bootCheckPool},
				ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
				BaseImagePullSpec:       registry + "/strata/os-base:latest",
				RenderedImagePushSecret: v1alpha1.SecretReference{Name: "e2e-push"},
				RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "e2e-pull"},
				RenderedImagePushSpec:   fmt.Sprintf("%s/strata/e2e-bootcheck-%d:latest", registry, time.Now().Unix()),
			},
		})).To(Succeed())

		var bad, failed string
		Eventually(func(g Gomega) {
			m := &v1alpha1.MachineOSConfig{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: bootCheckPool}, m)).To(Succeed())
			bad = m.Status.CurrentImagePullSpec
			g.Expect(bad).NotTo(BeEmpty())
			failed = ""
			for _, n := range nodes {
				if getNode(ctx, c, n).Annotations[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDegraded {
					failed = n
				}
			}
			g.Expect(failed).NotTo(BeEmpty(), "no node Degraded yet")
		}).WithContext(ctx).WithTimeout(10 * time.Minute).WithPolling(time.Second).Should(Succeed())
		badDigest := bad[strings.Index(bad, "@")+1:]
		origDigest := original[strings.Index(original, "@")+1:]

		By("the node is back on its previous image, Degraded with the boot check's verdict")
		n := getNode(ctx, c, failed)
		reason := n.Annotations[v1alpha1.ReasonAnnotation]
		Expect(reason).To(ContainSubstring("boot check"), "reason")
		Expect(reason).To(ContainSubstring(badDigest), "reason")
		Expect(reason).To(ContainSubstring("never started verifying"), "reason")
		Expect(reason).To(ContainSubstring(origDigest), "reason")
		Expect(n.Annotations[v1alpha1.CurrentImageAnnotation]).To(Equal(original))
		Expect(nodeReady(n)).To(BeTrue(), "the node is not Ready on its previous image")
		st, err := sims.Sim(ctx, failed, "status", "--format=json")
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
		Expect(host.Status.Booted.Image.ImageDigest).To(Equal(origDigest), "booted")
		Expect(sims.Reboots(failed)).To(Equal(2), "the update's reboot and the boot check's, no more")
		Expect(sims.DaemonLog(failed)).To(ContainSubstring("strata-boot-check: boot check: image " + badDigest))
		_, err = os.Stat(filepath.Join(sims.Root(failed), "etc", "strata-bootcheck.conf"))
		Expect(os.IsNotExist(err)).To(BeTrue(), "the previous image's /etc has the broken image's file: %v", err)
		verdict := bootcheck.Verdict(bootcheck.Dir(filepath.Join(sims.Root(failed), "var", "lib", "strata")), badDigest)
		Expect(verdict).NotTo(BeEmpty(), "no verdict in the node's boot check directory")

		By("the rollout halts: the other node is never sent the image")
		Consistently(func(g Gomega) {
			for _, other := range nodes {
				if other != failed {
					g.Expect(getNode(ctx, c, other).Annotations[v1alpha1.DesiredImageAnnotation]).NotTo(Equal(bad), "node %s was taken after a failure", other)
				}
			}
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			p := &v1alpha1.MachineConfigPool{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: bootCheckPool}, p)).To(Succeed())
			cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PoolNodeDegraded)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(cond.Message).To(ContainSubstring(failed))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
	})
})
