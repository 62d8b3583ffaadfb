//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/diskjob"
)

// A boot disk end to end: a MachineOSConfig with spec.bootDisk, its build
// on the test cluster, the boot disk Job running strata-bootdisk from
// strata/strata-bootdisk, the artifact in the local registry beside the
// image, and stratactl downloading the pool's disk.
var _ = Describe("A boot disk", func() {
	It("is made after the build, published beside the image, and downloaded by stratactl for the pool", SpecTimeout(12*time.Minute), func(ctx SpecContext) {
		c := newClient(e2eKubeconfig())
		const name = "e2e-disk"
		repo := fmt.Sprintf("strata/e2e-disk-%d", time.Now().Unix())
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: strataNS, Name: name + "-push"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"127.0.0.1:5000":{"auth":"` + e2ePushAuth + `"}}}`)},
		}
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, secret))).To(Succeed())
		ign := `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/strata/disk.conf","mode":420,"contents":{"source":"data:,on%20the%20disk"}}]}}`
		objs := []client.Object{
			&v1alpha1.MachineConfigPool{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1alpha1.MachineConfigPoolSpec{
					MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{name: "true"}},
				},
			},
			&v1alpha1.MachineConfig{
				ObjectMeta: metav1.ObjectMeta{Name: "50-" + name, Labels: map[string]string{name: "true"}},
				Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}},
			},
			&v1alpha1.MachineOSConfig{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1alpha1.MachineOSConfigSpec{
					MachineConfigPool:       v1alpha1.LocalObjectReference{Name: name},
					ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder, Strategy: v1alpha1.ConfigLayerStrategy},
					BaseImagePullSpec:       baseWithKernel(ctx),
					RenderedImagePushSecret: v1alpha1.SecretReference{Name: secret.Name},
					RenderedImagePushSpec:   registry + "/" + repo + ":latest",
					BootDisk:                &v1alpha1.BootDisk{SizeMiB: 512},
				},
			},
		}
		for _, o := range objs {
			Expect(c.Create(ctx, o)).To(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) {
			for i := len(objs) - 1; i >= 0; i-- {
				obj := objs[i]
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
				Eventually(func() bool {
					return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
				}).WithContext(ctx).WithTimeout(time.Minute).Should(BeTrue(), "%T %s is not deleted", obj, obj.GetName())
			}
		})
		created := time.Now()

		By("building the image")
		b := &v1alpha1.MachineOSBuild{}
		Eventually(func(g Gomega) {
			m := &v1alpha1.MachineOSConfig{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, m)).To(Succeed())
			g.Expect(m.Status.MachineOSBuild).NotTo(BeNil(), "conditions %+v", m.Status.Conditions)
			g.Expect(c.Get(ctx, client.ObjectKey{Name: m.Status.MachineOSBuild.Name}, b)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildSucceeded)).To(BeTrue(), "conditions %+v", b.Status.Conditions)
			g.Expect(m.Status.CurrentImagePullSpec).To(Equal(b.Status.DigestedImagePushSpec))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		image := b.Status.DigestedImagePushSpec

		By("making the boot disk in its Job")
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKey{Name: b.Name}, b)).To(Succeed())
			cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildBootDisk)
			g.Expect(cond).NotTo(BeNil())
			if cond.Reason == v1alpha1.ReasonBootDiskFailed {
				StopTrying(fmt.Sprintf("the boot disk failed: %s", cond.Message)).Now()
			}
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "BootDisk %+v", cond)
		}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		bd := b.Status.BootDisk
		Expect(bd.Image).To(Equal(image))
		Expect(bd.Artifact).To(MatchRegexp(`^` + regexp.QuoteMeta(registry+"/"+repo) + `@sha256:[a-f0-9]{64}$`))
		Expect(bd.Size).To(Equal(int64(512 << 20)))
		Expect(bd.Job.Name).To(Equal(diskjob.JobName(b.Name)))
		GinkgoWriter.Printf("MEASURE boot disk: objects created to disk published %s; disk Job %s; %d MiB raw, %d KiB compressed\n",
			time.Since(created).Round(time.Second), bd.Duration.Duration, bd.Size>>20, bd.CompressedSize>>10)

		By("downloading the pool's disk with stratactl")
		file := filepath.Join(GinkgoT().TempDir(), "disk.raw")
		out, err := stratactl(ctx, "boot-disk", "--pool", name, "-o", file)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(bd.RawDigest))
		st, err := os.Stat(file)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Size()).To(Equal(bd.Size))
		fs, err := exec.CommandContext(ctx, "dumpe2fs", "-h", file).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(fs))
		Expect(string(fs)).To(MatchRegexp(`Filesystem volume name:\s+strata-root`))
		// The pool's configuration is on it, where the booted system
		// finds it: the deployment's /etc.
		root := "/"
		ls, err := exec.CommandContext(ctx, "debugfs", "-R", "ls -p /ostree/deploy/default/deploy", file).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(ls))
		for _, line := range strings.Split(string(ls), "\n") {
			if f := strings.Split(line, "/"); len(f) > 5 && strings.HasSuffix(f[5], ".0") {
				root = "/ostree/deploy/default/deploy/" + f[5] + "/"
			}
		}
		conf, err := exec.CommandContext(ctx, "debugfs", "-R", "cat "+root+"etc/strata/disk.conf", file).Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(conf)).To(Equal("on the disk"))

		By("listing it beside the SBOM and the provenance")
		// inspect asks only the registry: no --kubeconfig.
		raw, err := exec.CommandContext(ctx, stratactlPath, "inspect", image).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(raw))
		Expect(string(raw)).To(MatchRegexp(regexp.QuoteMeta(v1alpha1.BootDiskArtifactType) + `\s+sha256:[a-f0-9]{64}\s+boot disk`))
	})
})

// baseWithKernel pushes the test OS base with what ostree's deploy needs
// of a bootable image besides its os-release: a kernel and an initramfs
// where bootc keeps them (their content does not matter: nothing boots
// here). It returns it by digest.
func baseWithKernel(ctx context.Context) string {
	GinkgoHelper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"usr/", "usr/lib/", "usr/lib/modules/", "usr/lib/modules/6.1.0-e2e/"} {
		Expect(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755})).To(Succeed())
	}
	for _, f := range []string{"vmlinuz", "initramfs.img"} {
		Expect(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "usr/lib/modules/6.1.0-e2e/" + f, Mode: 0o644, Size: int64(len(f))})).To(Succeed())
		_, err := tw.Write([]byte(f))
		Expect(err).NotTo(HaveOccurred())
	}
	Expect(tw.Close()).To(Succeed())

	return pushOnBase(ctx, "os-base-kernel", "e2e: a kernel and an initramfs", buf.Bytes())
}
