//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// registry is the test cluster's local registry; pods that talk to it run on
// the host network.
const registry = "127.0.0.1:5000"

var (
	clientset *kubernetes.Clientset
	adminCfg  *rest.Config
	nodeName  string
)

// restConfig is the test cluster's admin configuration.
func restConfig() *rest.Config { return rest.CopyConfig(adminCfg) }

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Strata e2e suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		// go test runs in the package directory.
		kubeconfig = filepath.Join("..", "..", ".infra", "cluster", "kubeconfig")
	}
	var err error
	adminCfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred(), "no test cluster? run make cluster-up (kubeconfig %s)", kubeconfig)
	clientset, err = kubernetes.NewForConfig(adminCfg)
	Expect(err).NotTo(HaveOccurred())
	nodeName, err = os.Hostname()
	Expect(err).NotTo(HaveOccurred())

	// hack/cluster/e2e.sh installs Strata (deploy.sh) before the suite.
	dep, err := clientset.AppsV1().Deployments(strataNS).Get(ctx, "strata-controller", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred(), "Strata is not installed: run hack/cluster/deploy.sh (make deploy; make test-e2e does)")
	Expect(dep.Status.AvailableReplicas).To(BeNumerically(">=", 1), "strata-controller is not available: see hack/cluster/deploy.sh")
})

// A failed spec shows what the controller and the daemon said.
var _ = AfterEach(func(ctx SpecContext) {
	if CurrentSpecReport().Failed() {
		dumpStrataLogs(ctx)
	}
})

// newNamespace creates a namespace for one spec and deletes it when the spec
// ends, so specs never see each other's objects.
func newNamespace(ctx context.Context) string {
	ns, err := clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(clientset.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})).To(Succeed())
	})
	// Pods are admitted only once the namespace's default service account
	// exists.
	Eventually(func(ctx context.Context) error {
		_, err := clientset.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	return ns.Name
}

// podLogs returns the logs of a pod's only container, read through the API
// server (which fetches them from the kubelet).
func podLogs(ctx context.Context, ns, pod string) (string, error) {
	b, err := clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of pod %s/%s: %w", ns, pod, err)
	}
	return string(b), nil
}
