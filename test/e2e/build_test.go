//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// buildScript is what the builder pod runs: buildah the way Strata's Job
// builder uses it (chroot isolation, vfs, --timestamp 0), pushing to the
// local registry over the host network.
const buildScript = `set -eu
mkdir -p /build
cp -L /input/* /build/
buildah bud --isolation chroot --storage-driver vfs --timestamp 0 --tls-verify=false \
  -f /build/Containerfile -t "$IMAGE" /build
buildah push --storage-driver vfs --tls-verify=false --digestfile /build/digest "$IMAGE"
echo "pushed $IMAGE@$(cat /build/digest)"
`

const containerfile = `FROM 127.0.0.1:5000/strata/os-base:latest
COPY motd /etc/motd
RUN mkdir -p /usr/lib/strata && echo built in a pod > /usr/lib/strata/e2e
LABEL dev.strata.e2e=true
`

var _ = Describe("A build Job", func() {
	It("builds a Containerfile with the builder image and pushes the image to the registry", SpecTimeout(10*time.Minute), func(ctx SpecContext) {
		ns := newNamespace(ctx)
		image := fmt.Sprintf("%s/strata-e2e/%s:built", registry, ns)

		_, err := clientset.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "build-input"},
			Data: map[string]string{
				"Containerfile": containerfile,
				"motd":          "Welcome to a Strata e2e image\n",
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		job, err := clientset.BatchV1().Jobs(ns).Create(ctx, buildJob(image), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("waiting for the Job to complete")
		Eventually(func(g Gomega, ctx context.Context) {
			j, err := clientset.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
					logs, _ := jobLogs(ctx, ns, job.Name)
					StopTrying(fmt.Sprintf("Job failed: %s: %s\nlogs:\n%s", c.Reason, c.Message, logs)).Now()
				}
			}
			g.Expect(j.Status.Conditions).To(ContainElement(And(
				HaveField("Type", batchv1.JobComplete),
				HaveField("Status", corev1.ConditionTrue),
			)))
		}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(time.Second).Should(Succeed())

		By("reading the build log through the API")
		logs, err := jobLogs(ctx, ns, job.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(logs).To(ContainSubstring("STEP 2/4: COPY motd /etc/motd"))
		m := regexp.MustCompile(`(?m)^pushed ` + regexp.QuoteMeta(image) + `@(sha256:[0-9a-f]{64})$`).FindStringSubmatch(logs)
		Expect(m).NotTo(BeNil(), "no digest in the build log:\n%s", logs)
		pushed := m[1]

		By("checking the pushed image with crane")
		Expect(crane(ctx, "digest", image)).To(Equal(pushed + "\n"))
		files, err := imageFiles(ctx, image+"@"+pushed)
		Expect(err).NotTo(HaveOccurred())
		Expect(files).To(HaveKeyWithValue("etc/motd", "Welcome to a Strata e2e image\n"))
		Expect(files).To(HaveKeyWithValue("usr/lib/strata/e2e", "built in a pod\n"))
		Expect(files).To(HaveKey("usr/lib/os-release"), "the base image's content is there")

		cfg, err := crane(ctx, "config", image+"@"+pushed)
		Expect(err).NotTo(HaveOccurred())
		var config struct {
			Config struct{ Labels map[string]string } `json:"config"`
		}
		Expect(json.Unmarshal([]byte(cfg), &config)).To(Succeed())
		Expect(config.Config.Labels).To(HaveKeyWithValue("dev.strata.e2e", "true"))
		Expect(config.Config.Labels).To(HaveKeyWithValue("containers.bootc", "1"), "inherited from the base")
	})
})

func buildJob(image string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "build"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					// The registry listens on the host's loopback only.
					HostNetwork: true,
					Containers: []corev1.Container{{
						Name:            "build",
						Image:           registry + "/strata/builder:latest",
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"/bin/sh", "-c", buildScript},
						Env:             []corev1.EnvVar{{Name: "IMAGE", Value: image}},
						// buildah's chroot isolation mounts and unshares.
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "input", MountPath: "/input", ReadOnly: true},
							{Name: "storage", MountPath: "/var/lib/containers"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "input", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "build-input"},
						}}},
						{Name: "storage", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}

// jobLogs returns the logs of the (only) pod of a Job.
func jobLogs(ctx context.Context, ns, job string) (string, error) {
	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		return "", err
	}
	if len(pods.Items) != 1 {
		return "", fmt.Errorf("job %s/%s has %d pods, want 1", ns, job, len(pods.Items))
	}
	return podLogs(ctx, ns, pods.Items[0].Name)
}

// crane runs the crane binary that hack/setup-infra.sh builds; it speaks
// plain HTTP to registries on 127.0.0.1.
func crane(ctx context.Context, args ...string) (string, error) {
	path, err := exec.LookPath("crane")
	if err != nil {
		path = filepath.Join("..", "..", ".infra", "bin", "crane")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("crane %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// imageFiles returns the regular files of an image's flattened filesystem
// (crane export), by path without the leading slash.
func imageFiles(ctx context.Context, ref string) (map[string]string, error) {
	out, err := crane(ctx, "export", ref, "-")
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	tr := tar.NewReader(strings.NewReader(out))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read export of %s: %w", ref, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[strings.TrimPrefix(h.Name, "./")] = string(b)
	}
}
