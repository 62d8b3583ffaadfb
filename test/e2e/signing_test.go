//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/test/simnode"
	"github.com/strata-dev/strata/test/testregistry"
)

// Signing and verification end to end (issue 24): the controller as
// installed signs the pool's images, and a simulated node, whose bootc
// simulator evaluates the node's containers policy with containers/image
// as bootc does, boots only what a trusted key signed. One node and
// three updates: the signed image, then the two images of the key
// rotation; the refusals cost none.

const signingPool = "e2e-signing"

var _ = Describe("Signing and verification", Ordered, func() {
	var (
		c        client.Client
		sims     *simnode.Cluster
		node     string
		pushSpec string
		oldKey   *signing.KeyPair
		signed   string // the first image, signed with oldKey and booted
		reg      = signing.Registry{Insecure: []string{registry}}
	)

	BeforeAll(func(ctx SpecContext) {
		kubeconfig := e2eKubeconfig()
		c = newClient(kubeconfig)
		registrySecrets(ctx, c)
		var nodes []string
		sims, nodes, _ = simulatedNodes(ctx, kubeconfig, "signing", 1, map[string]string{signingPool: "true"})
		node = nodes[0]
		// A repository of this run's own: the registry outlives runs, and
		// an earlier run's hand-pushed images must not be in the way.
		pushSpec = fmt.Sprintf("%s/strata/e2e-signing-%d:latest", registry, time.Now().Unix())

		DeferCleanup(func(ctx SpecContext) {
			for _, obj := range []client.Object{
				&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: signingPool}},
				&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: signingPool}},
				&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: signingPool}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: strataNS, Name: "e2e-signing-old"}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: strataNS, Name: "e2e-signing-new"}},
			} {
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
			}
		})
		Expect(c.Create(ctx, &v1alpha1.MachineConfigPool{
			ObjectMeta: metav1.ObjectMeta{Name: signingPool},
			Spec: v1alpha1.MachineConfigPoolSpec{
				NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{signingPool: "true"}},
				MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{signingPool: "true"}},
				MaxUnavailable:        ptr.To(intstr.FromInt32(1)),
				HealthCheckTimeout:    &metav1.Duration{Duration: 20 * time.Second},
			},
		})).To(Succeed())
	})

	AfterEach(func() {
		Expect(sims.Err()).NotTo(HaveOccurred(), "the simulated nodes failed behind the test's back")
	})

	It("signs the pool's image and rolls it out to a node that verifies it", SpecTimeout(10*time.Minute), func(ctx SpecContext) {
		oldKey = signingKey(ctx, c, "e2e-signing-old")
		Expect(c.Create(ctx, signingConfig("one"))).To(Succeed())
		Expect(c.Create(ctx, &v1alpha1.MachineOSConfig{
			ObjectMeta: metav1.ObjectMeta{Name: signingPool},
			Spec: v1alpha1.MachineOSConfigSpec{
				MachineConfigPool:       v1alpha1.LocalObjectReference{Name: signingPool},
				ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
				BaseImagePullSpec:       registry + "/strata/os-base:latest",
				RenderedImagePushSecret: v1alpha1.SecretReference{Name: "e2e-push"},
				RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "e2e-pull"},
				RenderedImagePushSpec:   pushSpec,
				Signing: &v1alpha1.ImageSigning{
					KeySecret:  v1alpha1.LocalObjectReference{Name: "e2e-signing-old"},
					PublicKeys: []v1alpha1.PEMPublicKey{v1alpha1.PEMPublicKey(oldKey.Public)},
				},
			},
		})).To(Succeed())

		signed = waitSignedImage(ctx, c, "")
		Expect(signing.Verify(ctx, signed, [][]byte{oldKey.Public}, reg)).To(Succeed(), "the signature of %s", signed)
		waitSigningNodeOn(ctx, c, node, signed)

		By("finding the pool's policy on the node: its repository, enforced with the key")
		var p v1alpha1.NodeSignaturePolicy
		Expect(json.Unmarshal([]byte(getNode(ctx, c, node).Annotations[v1alpha1.ImageSignaturePolicyAnnotation]), &p)).To(Succeed())
		Expect(p.Repository).To(Equal(strings.TrimSuffix(pushSpec, ":latest")))
		Expect(p.PublicKeys).To(Equal([]string{string(oldKey.Public)}))
		policy, err := os.ReadFile(filepath.Join(sims.Root(node), "etc", "containers", "policy.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(policy)).To(ContainSubstring("sigstoreSigned"))
		Expect(string(policy)).To(ContainSubstring(p.Repository))
	})

	It("refuses an unsigned image pushed by hand under the pool's tag, and a tampered signature", SpecTimeout(6*time.Minute), func(ctx SpecContext) {
		Expect(signed).NotTo(BeEmpty(), "the first spec rolled nothing out")
		// Paused, the controller leaves the node's desired image to this
		// test, as an attacker with write access to nodes would.
		setSigningPaused(ctx, c, true)
		reboots := sims.Reboots(node) + sims.SoftReboots(node)

		By("pushing an image by hand under the pool's tag, unsigned")
		byHand := pushByHand(ctx, signed, pushSpec, "by-hand")
		Expect(signing.Verify(ctx, byHand, [][]byte{oldKey.Public}, reg)).NotTo(Succeed(), "the image pushed by hand is signed")
		expectRefused(ctx, c, node, byHand, signed)

		By("signing another image with the pool's key and tampering with its signature attachment")
		tampered := pushByHand(ctx, signed, pushSpec, "tampered")
		Expect(signing.Sign(ctx, tampered, oldKey.Private, reg)).To(Succeed())
		Expect(signing.Verify(ctx, tampered, [][]byte{oldKey.Public}, reg)).To(Succeed(), "before the tampering")
		(&testregistry.Registry{Host: registry}).TamperSignatures(GinkgoTB(), tampered)
		Expect(signing.Verify(ctx, tampered, [][]byte{oldKey.Public}, reg)).NotTo(Succeed(), "after the tampering")
		expectRefused(ctx, c, node, tampered, signed)

		By("naming the signed image again: the node is back to Done, never rebooted")
		setDesired(ctx, c, node, signed)
		waitSigningNodeOn(ctx, c, node, signed)
		Expect(sims.Reboots(node)+sims.SoftReboots(node)).To(Equal(reboots), "a refused image rebooted the node")
		setSigningPaused(ctx, c, false)
	})

	It("rotates the signing key with no refusal", SpecTimeout(12*time.Minute), func(ctx SpecContext) {
		Expect(signed).NotTo(BeEmpty(), "the first spec rolled nothing out")
		newKey := signingKey(ctx, c, "e2e-signing-new")
		mosc := &v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: signingPool}}

		By("1. trusting both keys: a new image, signed with the old key, rolls out")
		update(ctx, c, mosc, func(m *v1alpha1.MachineOSConfig) {
			m.Spec.Signing.PublicKeys = []v1alpha1.PEMPublicKey{v1alpha1.PEMPublicKey(oldKey.Public), v1alpha1.PEMPublicKey(newKey.Public)}
		})
		both := waitSignedImage(ctx, c, signed)
		waitSigningNodeOn(ctx, c, node, both)

		By("2. signing with the new key: the current image is signed again with it")
		update(ctx, c, mosc, func(m *v1alpha1.MachineOSConfig) {
			m.Spec.Signing.KeySecret.Name = "e2e-signing-new"
		})
		Eventually(func() error {
			return signing.Verify(ctx, both, [][]byte{newKey.Public}, reg)
		}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "%s is not signed with the new key", both)

		By("3. dropping the old key: the new image, signed with the new key only, rolls out")
		update(ctx, c, mosc, func(m *v1alpha1.MachineOSConfig) {
			m.Spec.Signing.PublicKeys = []v1alpha1.PEMPublicKey{v1alpha1.PEMPublicKey(newKey.Public)}
		})
		last := waitSignedImage(ctx, c, both)
		Expect(signing.Verify(ctx, last, [][]byte{newKey.Public}, reg)).To(Succeed())
		Expect(signing.Verify(ctx, last, [][]byte{oldKey.Public}, reg)).NotTo(Succeed(), "%s is signed with the old key", last)
		waitSigningNodeOn(ctx, c, node, last)
	})
})

// signingKey makes a key pair and its Secret in strata-system, in the
// layout `cosign generate-key-pair k8s://strata-system/NAME` writes.
func signingKey(ctx context.Context, c client.Client, name string) *signing.KeyPair {
	kp, err := signing.GenerateKeyPair([]byte("e2e " + name))
	Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: strataNS, Name: name}}
	_, err = controllerutil.CreateOrUpdate(ctx, c, secret, func() error {
		secret.Data = map[string][]byte{"cosign.key": kp.Private.PEM, "cosign.password": kp.Private.Passphrase, "cosign.pub": kp.Public}
		return nil
	})
	Expect(err).NotTo(HaveOccurred())
	return kp
}

func signingConfig(version string) *v1alpha1.MachineConfig {
	ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/strata-signing.conf","mode":420,"contents":{"source":"data:,%s"}}]}}`, version)
	return &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: signingPool, Labels: map[string]string{signingPool: "true"}},
		Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}},
	}
}

// waitSignedImage waits for the MachineOSConfig's current build, of the
// pool's current rendered config, to succeed and be signed (ImageSigned),
// with an image other than not, and returns the image.
func waitSignedImage(ctx context.Context, c client.Client, not string) string {
	return waitSignedImageOf(ctx, c, signingPool, not)
}

// waitSignedImageOf is waitSignedImage for pool, whose MachineOSConfig
// has the pool's name.
func waitSignedImageOf(ctx context.Context, c client.Client, pool, not string) string {
	image := waitImageOf(ctx, c, pool, pool, not)
	Eventually(func(g Gomega) {
		m := &v1alpha1.MachineOSConfig{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: pool}, m)).To(Succeed())
		g.Expect(m.Status.MachineOSBuild).NotTo(BeNil())
		b := &v1alpha1.MachineOSBuild{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: m.Status.MachineOSBuild.Name}, b)).To(Succeed())
		g.Expect(b.Status.DigestedImagePushSpec).To(Equal(image), "build %s", b.Name)
		signedCond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildImageSigned)
		g.Expect(signedCond).NotTo(BeNil(), "build %s", b.Name)
		g.Expect(signedCond.Status).To(Equal(metav1.ConditionTrue), "build %s: %s: %s", b.Name, signedCond.Reason, signedCond.Message)
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return image
}

// waitSigningNodeOn waits until node reports Done on image, and fails at
// once if it reports Degraded: a signed image is never refused, also in
// the middle of a key rotation.
func waitSigningNodeOn(ctx context.Context, c client.Client, node, image string) {
	Eventually(func(g Gomega) {
		a := getNode(ctx, c, node).Annotations
		// Degraded naming image: refused. (Degraded naming another image
		// is the state of the update image replaced.)
		if a[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDegraded && strings.Contains(a[v1alpha1.ReasonAnnotation], image) {
			StopTrying(fmt.Sprintf("node %s is Degraded on %s: %s", node, image, a[v1alpha1.ReasonAnnotation])).Now()
		}
		g.Expect(a[v1alpha1.CurrentImageAnnotation]).To(Equal(image), "node %s (state %s: %s)", node, a[v1alpha1.StateAnnotation], a[v1alpha1.ReasonAnnotation])
		g.Expect(a[v1alpha1.StateAnnotation]).To(Equal(v1alpha1.NodeStateDone), "node %s: %s", node, a[v1alpha1.ReasonAnnotation])
	}).WithContext(ctx).WithTimeout(6 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// expectRefused names image as node's desired image, as the rollout
// controller would, and expects the node Degraded with the signature
// policy's reason, still on keep with nothing staged.
func expectRefused(ctx context.Context, c client.Client, node, image, keep string) {
	setDesired(ctx, c, node, image)
	Eventually(func(g Gomega) {
		a := getNode(ctx, c, node).Annotations
		g.Expect(a[v1alpha1.StateAnnotation]).To(Equal(v1alpha1.NodeStateDegraded), "node %s: %s", node, a[v1alpha1.ReasonAnnotation])
		g.Expect(a[v1alpha1.ReasonAnnotation]).To(ContainSubstring("refused by the signature policy"))
		g.Expect(a[v1alpha1.ReasonAnnotation]).To(ContainSubstring(image))
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	a := getNode(ctx, c, node).Annotations
	GinkgoWriter.Printf("node %s refused %s: %s\n", node, image, a[v1alpha1.ReasonAnnotation])
	Expect(a[v1alpha1.CurrentImageAnnotation]).To(Equal(keep), "the node left its image")
	Expect(a[v1alpha1.DesiredDrainAnnotation]).NotTo(HavePrefix(v1alpha1.DrainRequestPrefix), "a drain asked for a refused image")
}

// setDesired writes the node's desired image annotation, the rollout
// controller's word to the daemon.
func setDesired(ctx context.Context, c client.Client, node, image string) {
	update(ctx, c, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, func(n *corev1.Node) {
		n.Annotations[v1alpha1.DesiredImageAnnotation] = image
	})
}

func setSigningPaused(ctx context.Context, c client.Client, paused bool) {
	update(ctx, c, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: signingPool}}, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.Paused = paused
	})
}

// pushByHand pushes a copy of from with a label of its own (so a digest
// of its own) under tag, as a person with the push credentials would,
// and returns it by digest.
func pushByHand(ctx context.Context, from, tag, label string) string {
	_, err := crane(ctx, "mutate", from, "--label", "strata.e2e/pushed="+label, "--tag", tag)
	Expect(err).NotTo(HaveOccurred())
	digest, err := crane(ctx, "digest", tag)
	Expect(err).NotTo(HaveOccurred())
	return strings.TrimSuffix(tag, ":latest") + "@" + strings.TrimSpace(digest)
}
