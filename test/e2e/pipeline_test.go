//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/job"
)

// The build pipeline end to end: strata-controller, installed as its
// Deployment (hack/cluster/deploy.sh), renders a pool, builds its image
// in a Job with the builder image on the test cluster, and pushes it to
// the local registry.

const strataNS = "strata-system"

var _ = Describe("The build pipeline", Ordered, func() {
	var (
		c         client.Client
		mcCreated time.Time
		// first is the first build; the inputs return to it twice.
		first *v1alpha1.MachineOSBuild
		// repo is this run's repository: the registry outlives a cluster,
		// and an earlier run's admin stage must not be found in it.
		repo = fmt.Sprintf("strata/e2e-os-%d", time.Now().Unix())
	)

	BeforeAll(func(ctx SpecContext) {
		kubeconfig := os.Getenv("KUBECONFIG")
		if kubeconfig == "" {
			kubeconfig = filepath.Join("..", "..", ".infra", "cluster", "kubeconfig")
		}
		c = newClient(kubeconfig)

		// The local registry takes any credentials; the Secret is there
		// because a push secret is required.
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: strataNS, Name: "e2e-push"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"127.0.0.1:5000":{"auth":"` + e2ePushAuth + `"}}}`)},
		}
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, secret))).To(Succeed())

		// The MachineOSConfig's finalizer needs the controller, which
		// runs on.
		DeferCleanup(func(ctx SpecContext) {
			for _, obj := range []client.Object{
				&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}},
				&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "50-e2e"}},
				&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}},
			} {
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
				Eventually(func() bool {
					return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
				}).WithContext(ctx).WithTimeout(time.Minute).Should(BeTrue(), "%T %s is not deleted", obj, obj.GetName())
			}
		})
	})

	It("renders the pool and builds its image in a Job", SpecTimeout(10*time.Minute), func(ctx SpecContext) {
		Expect(c.Create(ctx, &v1alpha1.MachineConfigPool{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e"},
			Spec: v1alpha1.MachineConfigPoolSpec{
				MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e": "true"}},
			},
		})).To(Succeed())
		Expect(c.Create(ctx, &v1alpha1.MachineOSConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e"},
			Spec: v1alpha1.MachineOSConfigSpec{
				MachineConfigPool: v1alpha1.LocalObjectReference{Name: "e2e"},
				// One Job for everything first; the last spec moves to
				// ConfigLayer and compares.
				ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder, Strategy: v1alpha1.SingleJobStrategy},
				BaseImagePullSpec:       registry + "/strata/os-base:latest",
				RenderedImagePushSecret: v1alpha1.SecretReference{Name: "e2e-push"},
				RenderedImagePushSpec:   registry + "/" + repo + ":latest",
				ContainerFile: []v1alpha1.MachineOSContainerfile{{
					ContainerfileArch: v1alpha1.ContainerfileArchNoArch,
					Content:           "RUN echo layered > /usr/share/strata-e2e",
				}},
			},
		})).To(Succeed())
		mcCreated = time.Now()
		Expect(c.Create(ctx, machineConfig("hello from strata"))).To(Succeed())

		// The pool may render once without the MachineConfig first; that
		// build is interrupted at once, and its Job goes with it.
		Eventually(func(g Gomega) {
			p := &v1alpha1.MachineConfigPool{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: "e2e"}, p)).To(Succeed())
			var sources []string
			for _, s := range p.Status.Configuration.Source {
				sources = append(sources, s.Name)
			}
			g.Expect(sources).To(ContainElement("50-e2e"))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		build := waitBuild(ctx, c, "")
		jobCreated := waitJob(ctx, build.Name)
		GinkgoWriter.Printf("MEASURE MachineConfig created to build Job created: %s\n", jobCreated.Sub(mcCreated).Round(time.Millisecond))
		By("looking for the push secret's credentials where users read, while the build runs")
		waitPod(ctx, job.JobName(build.Name))
		expectNoCredentials(ctx, c, build, e2ePushAuth)

		build = waitBuildCondition(ctx, c, build.Name, v1alpha1.BuildSucceeded)
		Expect(build.Status.BuildStart).NotTo(BeNil())
		Expect(build.Status.BuildEnd).NotTo(BeNil())
		GinkgoWriter.Printf("MEASURE MachineConfig created to image pushed: %s (Job start to end %s)\n",
			build.Status.BuildEnd.Sub(mcCreated).Round(time.Second), build.Status.BuildEnd.Sub(build.Status.BuildStart.Time))
		Expect(build.Status.DigestedImagePushSpec).To(MatchRegexp(`^127\.0\.0\.1:5000/` + repo + `@sha256:[a-f0-9]{64}$`))

		By("checking the pushed image with crane")
		files, labels := imageContent(ctx, build.Status.DigestedImagePushSpec)
		Expect(files).To(HaveKeyWithValue("etc/strata/e2e.conf", "hello from strata"))
		Expect(files).To(HaveKeyWithValue("usr/share/strata-e2e", "layered\n"))
		Expect(files).To(HaveKey("usr/lib/bootc/kargs.d/10-strata.toml"))
		Expect(files["usr/lib/bootc/kargs.d/10-strata.toml"]).To(ContainSubstring(`"strata.e2e=1"`))
		Expect(labels).To(HaveKeyWithValue("machineconfiguration.strata.dev/pool", "e2e"))
		Expect(labels).To(HaveKeyWithValue("machineconfiguration.strata.dev/rendered-config", build.Spec.MachineConfig.Name))
		Expect(labels["machineconfiguration.strata.dev/base-image-digest"]).To(HavePrefix("sha256:"))

		By("looking for the push secret's credentials where users read, once the build ended: its Job and Secret are gone")
		expectNoCredentials(ctx, c, build, e2ePushAuth)

		first = build
		waitCurrent(ctx, c, first)
	})

	It("makes no new Job for the same inputs", SpecTimeout(2*time.Minute), func(ctx SpecContext) {
		before := jobNames(ctx)
		// Touch the MachineConfig without changing its content.
		update(ctx, c, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "50-e2e"}}, func(mc *v1alpha1.MachineConfig) {
			mc.Annotations = map[string]string{"e2e/touched": time.Now().String()}
		})
		Consistently(func() []string { return jobNames(ctx) }).WithTimeout(10 * time.Second).Should(Equal(before))
	})

	It("reports a failing RUN with its Containerfile line and keeps the current image", SpecTimeout(10*time.Minute), func(ctx SpecContext) {
		m := &v1alpha1.MachineOSConfig{}
		Expect(c.Get(ctx, client.ObjectKey{Name: "e2e"}, m)).To(Succeed())
		current := m.Status.CurrentImagePullSpec
		previous := m.Status.MachineOSBuild.Name
		update(ctx, c, m, func(m *v1alpha1.MachineOSConfig) {
			m.Spec.ContainerFile[0].Content = "RUN echo about to fail\nRUN exit 7"
		})

		build := waitBuild(ctx, c, previous)
		build = waitBuildCondition(ctx, c, build.Name, v1alpha1.BuildFailed)
		Expect(build.Status.Failure).NotTo(BeNil())
		Expect(build.Status.Failure.Step).To(Equal(v1alpha1.BuildStepBuild))
		Expect(build.Status.Failure.Message).To(MatchRegexp(`Containerfile line \d+: RUN exit 7`))
		Expect(build.Status.Failure.LogTail).NotTo(BeEmpty())
		GinkgoWriter.Printf("Failure: %s\n", build.Status.Failure.Message)

		By("reading the failed build's log with stratactl logs: its Job went when it ended, the status keeps the log's last lines")
		Eventually(func(g Gomega) {
			out, err := stratactl(ctx, "logs", build.Name)
			g.Expect(err).NotTo(HaveOccurred(), "%s", out)
			g.Expect(out).To(ContainSubstring("has no pod (any more)"))
			g.Expect(out).To(ContainSubstring("about to fail"))
			g.Expect(out).To(ContainSubstring("failed at stage"))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())

		Expect(c.Get(ctx, client.ObjectKey{Name: "e2e"}, m)).To(Succeed())
		Expect(m.Status.CurrentImagePullSpec).To(Equal(current), "a failed build must not move the current image")
		Expect(meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.ConfigDegraded)).To(BeTrue())

		By("going back to the first inputs, which reuses the first image")
		update(ctx, c, m, func(m *v1alpha1.MachineOSConfig) {
			m.Spec.ContainerFile[0].Content = "RUN echo layered > /usr/share/strata-e2e"
		})
		waitCurrent(ctx, c, first)
	})

	It("adopts the running Job after the controller's pod is deleted mid-build", SpecTimeout(10*time.Minute), func(ctx SpecContext) {
		previous := first.Name
		update(ctx, c, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "50-e2e"}}, func(mc *v1alpha1.MachineConfig) {
			mc.Spec = machineConfig("changed while the controller dies").Spec
		})

		build := waitBuild(ctx, c, previous)
		waitJob(ctx, build.Name)
		By("deleting the controller's pod while the build runs")
		restartController(ctx)

		build = waitBuildCondition(ctx, c, build.Name, v1alpha1.BuildSucceeded)
		// The Job went with the build's end; the Events say how many
		// were made.
		Expect(jobsCreated(ctx, build.Name)).To(Equal(1), "one Job for the build, no duplicate")
		files, _ := imageContent(ctx, build.Status.DigestedImagePushSpec)
		Expect(files).To(HaveKeyWithValue("etc/strata/e2e.conf", "changed while the controller dies"))
	})

	It("builds the same image with the ConfigLayer strategy, then adds a configuration change without a Job", SpecTimeout(10*time.Minute), func(ctx SpecContext) {
		m := &v1alpha1.MachineOSConfig{}
		Expect(c.Get(ctx, client.ObjectKey{Name: "e2e"}, m)).To(Succeed())
		singleJob := m.Status.CurrentImagePullSpec
		update(ctx, c, m, func(m *v1alpha1.MachineOSConfig) { m.Spec.ImageBuilder.Strategy = v1alpha1.ConfigLayerStrategy })

		build := waitBuild(ctx, c, m.Status.MachineOSBuild.Name)
		build = waitBuildCondition(ctx, c, build.Name, v1alpha1.BuildSucceeded)
		Expect(build.Status.Strategy).To(Equal(v1alpha1.ConfigLayerStrategy))
		admin := stage(build, v1alpha1.BuildStageAdmin)
		Expect(admin).NotTo(BeNil())
		Expect(admin.Reused).To(BeFalse(), "the admin stage has Containerfile content: a Job builds it")
		Expect(admin.Image).To(HavePrefix(registry + "/" + repo + "@sha256:"))
		GinkgoWriter.Printf("MEASURE ConfigLayer first build: stages %+v\n", build.Status.Stages)

		By("comparing the two images: file tree, base config and labels")
		layered := build.Status.DigestedImagePushSpec
		Expect(layered).NotTo(Equal(singleJob))
		Expect(imageTree(ctx, layered)).To(Equal(imageTree(ctx, singleJob)))
		Expect(imageConfig(ctx, layered)).To(Equal(imageConfig(ctx, singleJob)))

		By("changing a file of the configuration: no Job runs")
		jobs := jobNames(ctx)
		changed := time.Now()
		update(ctx, c, &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "50-e2e"}}, func(mc *v1alpha1.MachineConfig) {
			mc.Spec = machineConfig("added as a layer").Spec
		})
		next := waitBuild(ctx, c, build.Name)
		next = waitBuildCondition(ctx, c, next.Name, v1alpha1.BuildSucceeded)
		GinkgoWriter.Printf("MEASURE ConfigLayer configuration change: MachineConfig updated to build succeeded seen %s; stages %+v\n",
			time.Since(changed).Round(time.Millisecond), next.Status.Stages)
		// Old builds' Jobs may go with them (history); no new one comes.
		Expect(jobs).To(ContainElements(jobNames(ctx)))
		Expect(jobNames(ctx)).NotTo(ContainElement(job.JobName(next.Name)))
		again := stage(next, v1alpha1.BuildStageAdmin)
		Expect(again).NotTo(BeNil())
		Expect(again.Reused).To(BeTrue())
		Expect(again.Image).To(Equal(admin.Image))
		files, _ := imageContent(ctx, next.Status.DigestedImagePushSpec)
		Expect(files).To(HaveKeyWithValue("etc/strata/e2e.conf", "added as a layer"))
		Expect(files).To(HaveKeyWithValue("usr/share/strata-e2e", "layered\n"))
	})
})

func stage(b *v1alpha1.MachineOSBuild, name v1alpha1.BuildStage) *v1alpha1.BuildStageStatus {
	for i := range b.Status.Stages {
		if b.Status.Stages[i].Name == name {
			return &b.Status.Stages[i]
		}
	}
	return nil
}

// imageTree is an image's flattened file tree (crane export): for each
// path its type, mode, owner, link target and content digest; times are
// left out.
func imageTree(ctx context.Context, ref string) map[string]string {
	out, err := crane(ctx, "export", ref, "-")
	Expect(err).NotTo(HaveOccurred())
	tree := map[string]string{}
	tr := tar.NewReader(strings.NewReader(out))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tree
		}
		Expect(err).NotTo(HaveOccurred())
		sum := sha256.New()
		_, err = io.Copy(sum, tr)
		Expect(err).NotTo(HaveOccurred())
		tree[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = fmt.Sprintf("%c %04o %d:%d %q %x",
			h.Typeflag, h.Mode&0o7777, h.Uid, h.Gid, h.Linkname, sum.Sum(nil))
	}
}

// imageConfig is what of an image's config both strategies must agree on:
// labels (the base's and Strata's), environment, entrypoint and command.
func imageConfig(ctx context.Context, ref string) string {
	raw, err := crane(ctx, "config", ref)
	Expect(err).NotTo(HaveOccurred())
	var cfg struct {
		Config struct {
			Labels     map[string]string `json:"Labels"`
			Env        []string          `json:"Env"`
			Entrypoint []string          `json:"Entrypoint"`
			Cmd        []string          `json:"Cmd"`
		} `json:"config"`
	}
	Expect(json.Unmarshal([]byte(raw), &cfg)).To(Succeed())
	out, err := json.Marshal(cfg.Config)
	Expect(err).NotTo(HaveOccurred())
	return string(out)
}

// e2ePushAuth is the e2e push secret's auth string (e2e:e2e).
const e2ePushAuth = "ZTJlOmUyZQ=="

// expectNoCredentials looks for a registry auth string where users can
// read what the controller made of a build: the build Secret's files (the
// context unpacked), the Job and its pods (spec and status, with the
// termination messages), the build and its MachineOSConfig, and every
// event.
func expectNoCredentials(ctx context.Context, c client.Client, build *v1alpha1.MachineOSBuild, auth string) {
	needle := []byte(strings.TrimRight(auth, "="))
	texts := map[string][]byte{}
	add := func(what string, obj any) {
		raw, err := json.Marshal(obj)
		Expect(err).NotTo(HaveOccurred())
		texts[what] = raw
	}
	name := job.JobName(build.Name)
	current := &v1alpha1.MachineOSBuild{}
	Expect(c.Get(ctx, client.ObjectKeyFromObject(build), current)).To(Succeed())
	if ended(current) {
		// A build that ended keeps neither its Job (nor pods) nor the
		// Secret of its inputs: only what remains is searched.
		Eventually(func(g Gomega) {
			_, err := clientset.CoreV1().Secrets(strataNS).Get(ctx, name, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the build's Secret: %v", err)
			_, err = clientset.BatchV1().Jobs(strataNS).Get(ctx, name, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the build's Job: %v", err)
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		searchStatusAndEvents(ctx, c, build, texts, add, needle)
		return
	}
	secret, err := clientset.CoreV1().Secrets(strataNS).Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred(), "the build's Secret")
	for k, v := range secret.Data {
		texts["build Secret key "+k] = v
	}
	zr, err := gzip.NewReader(bytes.NewReader(secret.Data[job.KeyContext]))
	Expect(err).NotTo(HaveOccurred())
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		data, err := io.ReadAll(tr)
		Expect(err).NotTo(HaveOccurred())
		texts["build context file "+h.Name] = data
	}
	Expect(texts).To(HaveKey("build context file Containerfile"))
	jb, err := clientset.BatchV1().Jobs(strataNS).Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	add("Job", jb)
	pods, err := clientset.CoreV1().Pods(strataNS).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
	Expect(err).NotTo(HaveOccurred())
	Expect(pods.Items).NotTo(BeEmpty())
	add("pods", pods)
	searchStatusAndEvents(ctx, c, build, texts, add, needle)
}

// searchStatusAndEvents adds the build's and its MachineOSConfig's
// objects and every event to texts and expects needle in none of them.
func searchStatusAndEvents(ctx context.Context, c client.Client, build *v1alpha1.MachineOSBuild, texts map[string][]byte, add func(string, any), needle []byte) {
	mosc := &v1alpha1.MachineOSConfig{}
	Expect(c.Get(ctx, client.ObjectKey{Name: build.Spec.MachineOSConfig.Name}, mosc)).To(Succeed())
	add("MachineOSConfig", mosc)
	b := &v1alpha1.MachineOSBuild{}
	Expect(c.Get(ctx, client.ObjectKeyFromObject(build), b)).To(Succeed())
	add("MachineOSBuild", b)
	events, err := clientset.EventsV1().Events("").List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	add("events", events)
	coreEvents, err := clientset.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	add("core events", coreEvents)
	for where, text := range texts {
		Expect(bytes.Contains(text, needle)).To(BeFalse(), "the %s holds the registry credentials", where)
	}
}

// ended says whether a build reached Succeeded or Failed, or was
// interrupted.
func ended(b *v1alpha1.MachineOSBuild) bool {
	for _, t := range []string{v1alpha1.BuildSucceeded, v1alpha1.BuildFailed, v1alpha1.BuildInterrupted} {
		if meta.IsStatusConditionTrue(b.Status.Conditions, t) {
			return true
		}
	}
	return false
}

func machineConfig(content string) *v1alpha1.MachineConfig {
	ign := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/strata/e2e.conf","mode":420,"contents":{"source":"data:,%s"}}]}}`,
		strings.ReplaceAll(content, " ", "%20"))
	return &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "50-e2e", Labels: map[string]string{"e2e": "true"}},
		Spec: v1alpha1.MachineConfigSpec{
			Config:          runtime.RawExtension{Raw: []byte(ign)},
			KernelArguments: []string{"strata.e2e=1"},
		},
	}
}

// waitCurrent waits until the MachineOSConfig's build is b and its image
// current.
func waitCurrent(ctx context.Context, c client.Client, b *v1alpha1.MachineOSBuild) {
	Eventually(func(g Gomega) {
		m := &v1alpha1.MachineOSConfig{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "e2e"}, m)).To(Succeed())
		g.Expect(m.Status.MachineOSBuild).NotTo(BeNil())
		g.Expect(m.Status.MachineOSBuild.Name).To(Equal(b.Name))
		g.Expect(m.Status.CurrentImagePullSpec).To(Equal(b.Status.DigestedImagePushSpec))
		g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.ConfigReady)).To(BeTrue())
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
}

// waitBuild waits for the MachineOSConfig's current build to be another
// one than not, and of the pool's current rendered config (a build of an
// earlier one is about to be interrupted).
func waitBuild(ctx context.Context, c client.Client, not string) *v1alpha1.MachineOSBuild {
	b := &v1alpha1.MachineOSBuild{}
	Eventually(func(g Gomega) {
		m := &v1alpha1.MachineOSConfig{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "e2e"}, m)).To(Succeed())
		g.Expect(m.Status.MachineOSBuild).NotTo(BeNil(), "conditions %+v", m.Status.Conditions)
		g.Expect(m.Status.MachineOSBuild.Name).NotTo(Equal(not))
		g.Expect(c.Get(ctx, client.ObjectKey{Name: m.Status.MachineOSBuild.Name}, b)).To(Succeed())
		p := &v1alpha1.MachineConfigPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: m.Spec.MachineConfigPool.Name}, p)).To(Succeed())
		g.Expect(b.Spec.MachineConfig.Name).To(Equal(p.Status.Configuration.Name))
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	return b
}

func waitJob(ctx context.Context, build string) time.Time {
	var created time.Time
	Eventually(func(g Gomega) {
		_, err := clientset.BatchV1().Jobs(strataNS).Get(ctx, job.JobName(build), metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		created = time.Now()
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
	return created
}

func waitBuildCondition(ctx context.Context, c client.Client, build, cond string) *v1alpha1.MachineOSBuild {
	b := &v1alpha1.MachineOSBuild{}
	Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: build}, b)).To(Succeed())
		for _, other := range []string{v1alpha1.BuildSucceeded, v1alpha1.BuildFailed, v1alpha1.BuildInterrupted} {
			if other != cond && meta.IsStatusConditionTrue(b.Status.Conditions, other) {
				StopTrying(fmt.Sprintf("build %s ended %s, want %s: %+v", build, other, cond, b.Status.Failure)).Now()
			}
		}
		g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, cond)).To(BeTrue(), "conditions %+v", b.Status.Conditions)
	}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return b
}

// jobsCreated counts the JobCreated Events about a build (a series
// counts its occurrences).
func jobsCreated(ctx context.Context, build string) int {
	list, err := clientset.EventsV1().Events("").List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name != build || e.Reason != "JobCreated" {
			continue
		}
		if e.Series != nil {
			n += int(max(e.Series.Count, 1))
		} else {
			n++
		}
	}
	return n
}

// waitPod waits for a pod of a Job.
func waitPod(ctx context.Context, jobName string) {
	Eventually(func(g Gomega) {
		pods, err := clientset.CoreV1().Pods(strataNS).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + jobName})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).NotTo(BeEmpty())
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
}

func jobNames(ctx context.Context) []string {
	list, err := clientset.BatchV1().Jobs(strataNS).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, j := range list.Items {
		names = append(names, j.Name)
	}
	return names
}

// imageContent reads a pushed image's files and labels with crane.
func imageContent(ctx context.Context, ref string) (map[string]string, map[string]string) {
	files, err := imageFiles(ctx, ref)
	Expect(err).NotTo(HaveOccurred())
	raw, err := crane(ctx, "config", ref)
	Expect(err).NotTo(HaveOccurred())
	var cfg struct {
		Config struct{ Labels map[string]string } `json:"config"`
	}
	Expect(json.Unmarshal([]byte(raw), &cfg)).To(Succeed())
	return files, cfg.Config.Labels
}
