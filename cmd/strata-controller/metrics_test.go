package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// TestControllerServesStrataMetrics runs the built controller with plain
// HTTP metrics and reads /metrics as Prometheus would: a pool's node
// counts and Degraded conditions appear once it is reconciled, so the
// binary registers Strata's metrics and the update tracker and sets them.
func TestControllerServesStrataMetrics(t *testing.T) {
	env := testenv.Start(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "strata-controller")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte("build:\n  builderImage: registry.example.com/strata/builder@sha256:"+strings.Repeat("b", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A free port: taken, then released for the controller to bind.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "--config", config, "--metrics-bind-address="+addr, "--metrics-secure=false", "--health-probe-bind-address=0")
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kubeconfig)
	logPath := filepath.Join(dir, "controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("controller log:\n%s", out)
		}
	})

	ctx := context.Background()
	labels := map[string]string{"served-pool": "true"}
	pool := &v1alpha1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: "served"},
		Spec:       v1alpha1.MachineConfigPoolSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "served-0", Labels: labels,
		Annotations: map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateWorking}}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`strata_pool_nodes{pool="served",state="Working"} 1`,
		`strata_pool_nodes{pool="served",state="Done"} 0`,
		`strata_pool_degraded{condition="Degraded",pool="served"} 0`,
		`# TYPE strata_pool_gate_held gauge`,
	}
	testenv.Eventually(t, time.Minute, "strata metrics served", func() error {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		for _, w := range want {
			if !strings.Contains(string(body), w) {
				return fmt.Errorf("no %q in /metrics", w)
			}
		}
		return nil
	})
}
