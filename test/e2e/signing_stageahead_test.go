//go:build e2e

package e2e

import (
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/simnode"
	"github.com/strata-dev/strata/test/testregistry"
)

// Staging ahead where the pool signs (issue 37 finding 3): the node
// verifies what it downloads ahead as it verifies what it stages at its
// turn. The controller signs the pool's image; its signature attachment
// is then emptied in the registry, as anyone with push rights on the
// repository can, and the controller, which checked the signature at
// signing, asks the node to stage it ahead (outside the pool's
// maintenance window, so that no node is taken yet). The node refuses to
// stage it: nothing staged, no stagedImage, a StageAheadRefused Event.
// At its turn the update fails the same way, and the node never boots
// it (before the fix it staged the image ahead unverified, and its turn
// only unlocked the stage and booted it).

const signAheadPool = "e2e-sign-ahead"

var _ = Describe("Signing and staging ahead", Ordered, func() {
	var (
		c        client.Client
		sims     *simnode.Cluster
		node     string
		pushSpec string
		key      *signing.KeyPair
		signed   string
	)

	BeforeAll(func(ctx SpecContext) {
		kubeconfig := e2eKubeconfig()
		c = newClient(kubeconfig)
		registrySecrets(ctx, c)
		var nodes []string
		// bootc main: switch --download-only, so the node stages ahead.
		sims, nodes, _ = simulatedNodesOn(ctx, kubeconfig, "signahead", 1, map[string]string{signAheadPool: "true"}, bootcsim.VersionMain)
		node = nodes[0]
		pushSpec = fmt.Sprintf("%s/strata/e2e-sign-ahead-%d:latest", registry, time.Now().Unix())
		DeferCleanup(func(ctx SpecContext) {
			for _, obj := range []client.Object{
				&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: signAheadPool}},
				&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: signAheadPool}},
				&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: signAheadPool}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: strataNS, Name: "e2e-sign-ahead-key"}},
			} {
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
			}
		})
		Expect(c.Create(ctx, &v1alpha1.MachineConfigPool{
			ObjectMeta: metav1.ObjectMeta{Name: signAheadPool},
			Spec: v1alpha1.MachineConfigPoolSpec{
				NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{signAheadPool: "true"}},
				MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{signAheadPool: "true"}},
				MaxUnavailable:        ptr.To(intstr.FromInt32(1)),
				StageAhead:            ptr.To(int32(1)),
				HealthCheckTimeout:    &metav1.Duration{Duration: 20 * time.Second},
			},
		})).To(Succeed())
	})

	AfterEach(func() {
		Expect(sims.Err()).NotTo(HaveOccurred(), "the simulated nodes failed behind the test's back")
	})

	It("rolls the signed image out", SpecTimeout(10*time.Minute), func(ctx SpecContext) {
		key = signingKey(ctx, c, "e2e-sign-ahead-key")
		Expect(c.Create(ctx, signAheadConfig("one"))).To(Succeed())
		Expect(c.Create(ctx, &v1alpha1.MachineOSConfig{
			ObjectMeta: metav1.ObjectMeta{Name: signAheadPool},
			Spec: v1alpha1.MachineOSConfigSpec{
				MachineConfigPool:       v1alpha1.LocalObjectReference{Name: signAheadPool},
				ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
				BaseImagePullSpec:       registry + "/strata/os-base:latest",
				RenderedImagePushSecret: v1alpha1.SecretReference{Name: "e2e-push"},
				RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "e2e-pull"},
				RenderedImagePushSpec:   pushSpec,
				Signing: &v1alpha1.ImageSigning{
					KeySecret:  v1alpha1.LocalObjectReference{Name: "e2e-sign-ahead-key"},
					PublicKeys: []v1alpha1.PEMPublicKey{v1alpha1.PEMPublicKey(key.Public)},
				},
			},
		})).To(Succeed())
		signed = waitSignedImageOf(ctx, c, signAheadPool, "")
		waitNodeDoneOn(ctx, c, node, signed)
	})

	It("refuses to stage ahead an image whose signatures were removed, and refuses it at its turn", SpecTimeout(12*time.Minute), func(ctx SpecContext) {
		Expect(signed).NotTo(BeEmpty(), "the first spec rolled nothing out")
		pool := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: signAheadPool}}
		// Paused while the next image is built and signed, so that
		// nothing stages it before its signatures are removed.
		update(ctx, c, pool, func(p *v1alpha1.MachineConfigPool) { p.Spec.Paused = true })
		update(ctx, c, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: signAheadPool}}, func(m *v1alpha1.MachineConfig) {
			m.Spec = signAheadConfig("two").Spec
		})
		next := waitSignedImageOf(ctx, c, signAheadPool, signed)
		reg := signing.Registry{Insecure: []string{registry}}
		Expect(signing.Verify(ctx, next, [][]byte{key.Public}, reg)).To(Succeed(), "%s as the controller signed it", next)

		By("removing the signatures of " + next + " from the registry")
		emptySignatures(ctx, next)
		Expect(signing.Verify(ctx, next, [][]byte{key.Public}, reg)).NotTo(Succeed(), "%s still verifies", next)
		reboots := sims.Reboots(node) + sims.SoftReboots(node)

		By("closing the maintenance window and resuming: the node is asked to stage ahead, not taken")
		update(ctx, c, pool, func(p *v1alpha1.MachineConfigPool) {
			p.Spec.MaintenanceWindows = []v1alpha1.MaintenanceWindow{closedWindow()}
			p.Spec.Paused = false
		})
		Eventually(func(g Gomega) {
			g.Expect(getNode(ctx, c, node).Annotations[v1alpha1.DesiredStageAnnotation]).To(Equal(next))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(nodeEvents(ctx, node, "StageAheadRefused")).To(ContainElement(And(ContainSubstring(next), ContainSubstring("refused by the signature policy"))))
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "node %s did not refuse to stage %s ahead", node, next)
		// The refusal was observed: nothing is staged, nothing reported.
		h := simStatus(ctx, sims, node)
		Expect(h.Status.Staged).To(BeNil(), "node %s staged an image nobody verified", node)
		a := getNode(ctx, c, node).Annotations
		Expect(a[v1alpha1.StagedImageAnnotation]).To(BeEmpty())
		Expect(a[v1alpha1.CurrentImageAnnotation]).To(Equal(signed))
		Expect(a[v1alpha1.StateAnnotation]).To(Equal(v1alpha1.NodeStateDone))

		By("opening the window: at its turn the node refuses the image and keeps its own")
		update(ctx, c, pool, func(p *v1alpha1.MachineConfigPool) { p.Spec.MaintenanceWindows = nil })
		Eventually(func(g Gomega) {
			a := getNode(ctx, c, node).Annotations
			g.Expect(a[v1alpha1.DesiredImageAnnotation]).To(Equal(next))
			g.Expect(a[v1alpha1.StateAnnotation]).To(Equal(v1alpha1.NodeStateDegraded), "node %s: %s", node, a[v1alpha1.ReasonAnnotation])
			g.Expect(a[v1alpha1.ReasonAnnotation]).To(ContainSubstring("refused by the signature policy"))
			g.Expect(a[v1alpha1.ReasonAnnotation]).To(ContainSubstring(next))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		a = getNode(ctx, c, node).Annotations
		GinkgoWriter.Printf("node %s refused %s at its turn: %s\n", node, next, a[v1alpha1.ReasonAnnotation])
		Expect(a[v1alpha1.CurrentImageAnnotation]).To(Equal(signed), "the node left its image")
		Expect(a[v1alpha1.DesiredDrainAnnotation]).NotTo(HavePrefix(v1alpha1.DrainRequestPrefix), "a drain asked for a refused image")
		h = simStatus(ctx, sims, node)
		Expect(h.Status.Booted.Digest()).To(Equal(digestOf(signed)))
		Expect(h.Status.Staged).To(BeNil(), "node %s staged an image nobody verified", node)
		Expect(sims.Reboots(node)+sims.SoftReboots(node)).To(Equal(reboots), "a refused image rebooted the node")
	})
})

func signAheadConfig(version string) *v1alpha1.MachineConfig {
	ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/strata-sign-ahead.conf","mode":420,"contents":{"source":"data:,%s"}}]}}`, version)
	return &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: signAheadPool, Labels: map[string]string{signAheadPool: "true"}},
		Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}},
	}
}

// closedWindow is a maintenance window that is not open now, nor for
// the next eleven hours: every day, opening twelve hours from now, for
// an hour.
func closedWindow() v1alpha1.MaintenanceWindow {
	start := time.Now().UTC().Add(12 * time.Hour)
	return v1alpha1.MaintenanceWindow{
		Days:     []v1alpha1.Weekday{v1alpha1.Monday, v1alpha1.Tuesday, v1alpha1.Wednesday, v1alpha1.Thursday, v1alpha1.Friday, v1alpha1.Saturday, v1alpha1.Sunday},
		Start:    start.Format("15:04"),
		Duration: metav1.Duration{Duration: time.Hour},
		TimeZone: "UTC",
	}
}

// emptySignatures replaces image's sigstore attachment by one with no
// signature, as anyone with push rights on the repository can: the
// image is unsigned from then on.
func emptySignatures(ctx SpecContext, image string) {
	GinkgoHelper()
	tag := testregistry.SignatureTag(GinkgoTB(), image)
	Expect(remote.Write(tag, mutate.MediaType(empty.Image, types.OCIManifestSchema1), remote.WithContext(ctx))).To(Succeed())
}

// waitNodeDoneOn waits until node reports Done on image.
func waitNodeDoneOn(ctx SpecContext, c client.Client, node, image string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		a := getNode(ctx, c, node).Annotations
		g.Expect(a[v1alpha1.CurrentImageAnnotation]).To(Equal(image), "node %s (state %s: %s)", node, a[v1alpha1.StateAnnotation], a[v1alpha1.ReasonAnnotation])
		g.Expect(a[v1alpha1.StateAnnotation]).To(Equal(v1alpha1.NodeStateDone), "node %s: %s", node, a[v1alpha1.ReasonAnnotation])
	}).WithContext(ctx).WithTimeout(6 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
}
