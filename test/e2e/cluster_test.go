//go:build e2e

package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ = Describe("The test cluster", func() {
	It("has one Ready node", func(ctx SpecContext) {
		node, err := clientset.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(node.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.NodeReady),
			HaveField("Status", corev1.ConditionTrue),
		)))
		Expect(node.Spec.Taints).To(BeEmpty())
	})

	It("schedules and runs a pod from a local image and serves its logs", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		pod, err := clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "hello"},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name:    "hello",
					Image:   registry + "/strata/busybox:latest",
					Command: []string{"sh", "-c", "echo hello from $(hostname)"},
				}},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(ctx context.Context) (*corev1.Pod, error) {
			return clientset.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(And(
			HaveField("Spec.NodeName", nodeName),
			HaveField("Status.Phase", corev1.PodSucceeded),
		))
		Expect(podLogs(ctx, ns, pod.Name)).To(Equal("hello from hello\n"))
	})
})
