//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/simnode"
	"github.com/strata-dev/strata/test/testenv"
)

// e2eKubeconfig is the test cluster's admin kubeconfig.
func e2eKubeconfig() string {
	if k := os.Getenv("KUBECONFIG"); k != "" {
		return k
	}
	return filepath.Join("..", "..", ".infra", "cluster", "kubeconfig")
}

// registrySecrets makes the push and pull Secrets the specs' MachineOSConfigs
// name, with credentials of their own. The local registry takes any
// credentials: the Secrets prove that they reach the builder and the
// nodes, and that the push secret reaches no node.
func registrySecrets(ctx context.Context, c client.Client) {
	for name, auth := range map[string]string{"e2e-push": e2ePushAuth, "e2e-pull": e2ePullAuth} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: strataNS, Name: name}}
		// Updated if it exists: an earlier run's may hold other credentials.
		_, err := controllerutil.CreateOrUpdate(ctx, c, secret, func() error {
			secret.Type = corev1.SecretTypeDockerConfigJson
			secret.Data = map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"127.0.0.1:5000":{"auth":"` + auth + `"}}}`)}
			return nil
		})
		Expect(err).NotTo(HaveOccurred())
	}
}

// e2ePullAuth is the e2e node pull secret's auth string (e2e-pull:e2e).
const e2ePullAuth = "ZTJlLXB1bGw6ZTJl"

// nodeSecretsNS is where the controller copies the node pull secrets.
const nodeSecretsNS = "strata-nodes"

// simulatedNodes registers n simulated nodes labelled with labels, each
// with its own daemon, installed with the test OS base by digest (also
// returned); they are removed when the spec's container ends.
func simulatedNodes(ctx context.Context, kubeconfig, prefix string, n int, labels map[string]string) (*simnode.Cluster, []string, string) {
	return simulatedNodesOn(ctx, kubeconfig, prefix, n, labels, "")
}

// simulatedNodesOn is simulatedNodes with the nodes on a bootc release
// of bootc-sim's (empty: its default).
func simulatedNodesOn(ctx context.Context, kubeconfig, prefix string, n int, labels map[string]string, bootcVersion bootcsim.Version) (*simnode.Cluster, []string, string) {
	digest, err := crane(ctx, "digest", registry+"/strata/os-base:latest")
	Expect(err).NotTo(HaveOccurred())
	original := registry + "/strata/os-base@" + strings.TrimSpace(digest)
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	daemon, bootcSim, err := simnode.Build(ctx, root, GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	sims, err := simnode.New(ctx, simnode.Config{
		Kubeconfig: kubeconfig, Daemon: daemon, BootcSim: bootcSim, OriginalImage: original,
		NamePrefix: prefix, Log: GinkgoWriter, InsecureRegistries: []string{registry},
		BootcVersion: string(bootcVersion),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { Expect(sims.Stop(ctx)).To(Succeed()) })
	nodes, err := sims.AddNodes(ctx, n, labels)
	Expect(err).NotTo(HaveOccurred())
	return sims, nodes, original
}

var (
	stratactlOnce sync.Once
	stratactlDir  string
	stratactlPath string
	stratactlErr  error
)

var _ = AfterSuite(func() {
	if stratactlDir != "" {
		Expect(os.RemoveAll(stratactlDir)).To(Succeed())
	}
})

// stratactl runs the stratactl of this tree, as a user would, built once
// per suite.
func stratactl(ctx context.Context, args ...string) (string, error) {
	stratactlOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			stratactlErr = err
			return
		}
		stratactlDir, err = os.MkdirTemp("", "strata-e2e-stratactl-")
		if err != nil {
			stratactlErr = err
			return
		}
		stratactlPath = filepath.Join(stratactlDir, "stratactl")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", stratactlPath, filepath.Join(root, "cmd", "stratactl")).CombinedOutput(); err != nil {
			stratactlErr = fmt.Errorf("go build stratactl: %w\n%s", err, out)
		}
	})
	if stratactlErr != nil {
		return "", stratactlErr
	}
	out, err := exec.CommandContext(ctx, stratactlPath, append(args, "--kubeconfig", e2eKubeconfig())...).CombinedOutput()
	return string(out), err
}
