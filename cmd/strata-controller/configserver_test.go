package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/configserver"
	"github.com/strata-dev/strata/controllers/bootstrap"
	"github.com/strata-dev/strata/test/testenv"
)

// TestConfigServerMode (issue 25 points 1 to 3) runs the built binary
// twice against a real apiserver, as the install does: the controller
// (which renders the pool, releases it for new nodes, makes its token and
// the serving certificate) and `strata-controller config-server`, as the
// config server's ServiceAccount with the RBAC of config/configserver
// (impersonated): the pool's token gets the pool's /var-bound file over
// HTTPS with the controller's CA; no token, or another pool's, nothing.
// That ServiceAccount can read no Secret of strata-system, where the push
// and build secrets are.
func TestConfigServerMode(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	for _, ns := range []string{"strata-system", "strata-nodes", "strata-config-server"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Install(ctx, "config/configserver"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "strata-controller")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	kubeconfig := func(name, as string) string {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
		cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Impersonate: as}
		cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
		cfg.CurrentContext = "envtest"
		p := filepath.Join(dir, name)
		if err := clientcmd.WriteToFile(*cfg, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte("build:\n  builderImage: registry.example.com/strata/builder@sha256:"+strings.Repeat("b", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(kubeconfig string, args ...string) {
		var out strings.Builder
		cmd := exec.Command(bin, args...)
		cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kubeconfig)
		cmd.Stdout, cmd.Stderr = &lockedWriter{w: &out}, &lockedWriter{w: &out}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("%s %v:\n%s", bin, args, out.String())
			}
		})
	}
	start(kubeconfig("admin", ""), "--config", config, "--metrics-bind-address=0", "--health-probe-bind-address=0")

	for _, p := range []string{"served", "other"} {
		if err := env.Client.Create(ctx, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: p}, Spec: v1alpha1.MachineConfigPoolSpec{
			NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"pool": p}},
			MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": p}},
			BootstrapToken:        &v1alpha1.BootstrapToken{},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "50-served", Labels: map[string]string{"pool": "served"}},
		Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
			`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/var/lib/served","contents":{"source":"data:,new%20node"}}]}}`)}},
	}); err != nil {
		t.Fatal(err)
	}
	secret := func(name string) (*corev1.Secret, error) {
		var s corev1.Secret
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.ConfigServerNamespace, Name: name}, &s)
		return &s, err
	}
	var caPool *x509.CertPool
	tokens := map[string]string{}
	testenv.Eventually(t, time.Minute, "the tokens and the serving certificate", func() error {
		for _, p := range []string{"served", "other"} {
			s, err := secret(v1alpha1.BootstrapTokenSecretName(p))
			if err != nil {
				return err
			}
			tokens[p] = string(s.Data[v1alpha1.BootstrapTokenKey])
		}
		s, err := secret(v1alpha1.ConfigServerTLSSecret)
		if err != nil {
			return err
		}
		caPool = x509.NewCertPool()
		caPool.AppendCertsFromPEM(s.Data["ca.crt"])
		return nil
	})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start(kubeconfig("config-server", "system:serviceaccount:strata-system:strata-config-server"),
		"config-server", "--bind-address="+addr, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--daemon-image=registry.example.com/strata/strata-daemon:v1")

	// The certificate names the Service, not 127.0.0.1: verify the chain
	// to the controller's CA with the Service's name.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: caPool, ServerName: "strata-config-server.strata-system.svc"}}}
	get := func(auth string) (int, []byte, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/config/served", nil)
		if err != nil {
			return 0, nil, err
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	var body []byte
	testenv.Eventually(t, time.Minute, "the pool's config", func() error {
		code, b, err := get("Bearer " + tokens["served"])
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, b)
		}
		body = b
		return nil
	})
	var cfg struct {
		Storage struct {
			Files []struct{ Path string } `json:"files"`
		} `json:"storage"`
		Systemd struct {
			Units []json.RawMessage `json:"units"`
		} `json:"systemd"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Storage.Files) != 1 || cfg.Storage.Files[0].Path != "/var/lib/served" || len(cfg.Systemd.Units) != 0 {
		t.Errorf("served %s; want the /var file and no first-boot unit (a pool without an image keeps the install image)", body)
	}
	for auth, want := range map[string]int{"": http.StatusUnauthorized, "Bearer " + tokens["other"]: http.StatusForbidden} {
		code, b, err := get(auth)
		if err != nil || code != want || strings.Contains(string(b), "served") {
			t.Errorf("with %q: %d %s %v, want %d and nothing", auth[:min(len(auth), 7)], code, b, err, want)
		}
	}

	// As the server's ServiceAccount (its RBAC is in force: it served):
	// no Secret of strata-system, by name or by list, and no list of its
	// DaemonSets; its own tokens, yes.
	sa := rest.CopyConfig(env.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:strata-system:strata-config-server"}
	c, err := client.New(sa, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	push := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: "registry-push"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"cHVzaDpwdXNo"}}}`)},
	}
	if err := env.Client.Create(ctx, push); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(push), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the config server's get of Secret strata-system/%s: %v, want Forbidden", push.Name, err)
	}
	if err := c.List(ctx, &corev1.SecretList{}, client.InNamespace("strata-system")); !apierrors.IsForbidden(err) {
		t.Errorf("the config server's list of Secrets in strata-system: %v, want Forbidden", err)
	}
	if err := c.List(ctx, &appsv1.DaemonSetList{}, client.InNamespace("strata-system")); !apierrors.IsForbidden(err) {
		t.Errorf("the config server's list of DaemonSets in strata-system: %v, want Forbidden", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: v1alpha1.ConfigServerNamespace, Name: v1alpha1.BootstrapTokenSecretName("served")}, &corev1.Secret{}); err != nil {
		t.Errorf("the config server's get of its pool's token: %v", err)
	}

	// A running node's daemon (issue 37, finding 10), trusting the CA the
	// controller publishes: its token for the config server, bound to a
	// pod on its node, gets the node's desired config, with the server's
	// own RBAC (tokenreviews, nodes); another pool's, no.
	var cm corev1.ConfigMap
	testenv.Eventually(t, time.Minute, "the published CA", func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: "strata-system", Name: bootstrap.CAConfigMap}, &cm)
	})
	daemonCAs := x509.NewCertPool()
	if !daemonCAs.AppendCertsFromPEM([]byte(cm.Data[bootstrap.CAKey])) {
		t.Fatalf("ConfigMap %s holds no CA: %v", bootstrap.CAConfigMap, cm.Data)
	}
	rendered := map[string]string{}
	testenv.Eventually(t, time.Minute, "the pools' rendered configs", func() error {
		for _, p := range []string{"served", "other"} {
			var pool v1alpha1.MachineConfigPool
			if err := env.Client.Get(ctx, client.ObjectKey{Name: p}, &pool); err != nil {
				return err
			}
			if pool.Status.NewNodes == nil || pool.Status.NewNodes.Config == "" {
				return fmt.Errorf("pool %s has no rendered config yet", p)
			}
			rendered[p] = pool.Status.NewNodes.Config
		}
		return nil
	})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "served-node", Annotations: map[string]string{
		v1alpha1.NodePoolAnnotation:      "served",
		v1alpha1.DesiredConfigAnnotation: rendered["served"],
	}}}
	daemonSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: "strata-daemon"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: "strata-daemon-served-node"},
		Spec: corev1.PodSpec{NodeName: node.Name, ServiceAccountName: daemonSA.Name,
			Containers: []corev1.Container{{Name: "daemon", Image: "registry.example.com/strata/strata-daemon:v1"}}},
	}
	for _, o := range []client.Object{node, daemonSA, pod} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:      []string{configserver.NodeTokenAudience},
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if err := env.Client.SubResource("token").Create(ctx, daemonSA, tr); err != nil {
		t.Fatal(err)
	}
	dc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: daemonCAs, ServerName: "strata-config-server.strata-system.svc"}}}
	nodeGet := func(name string) (int, []byte, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+configserver.NodeMachineConfigPath+name, nil)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := dc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	if code, b, err := nodeGet(rendered["served"]); err != nil || code != http.StatusOK || !strings.Contains(string(b), "/var/lib/served") {
		t.Errorf("the node's desired config %s: %d %s %v, want it", rendered["served"], code, b, err)
	}
	if code, b, err := nodeGet(rendered["other"]); err != nil || code != http.StatusForbidden {
		t.Errorf("another pool's config %s: %d %s %v, want 403", rendered["other"], code, b, err)
	}
}

// lockedWriter serialises a process's stdout and stderr into one builder.
type lockedWriter struct{ w *strings.Builder }

func (l *lockedWriter) Write(p []byte) (int, error) {
	lockedMu.Lock()
	defer lockedMu.Unlock()
	return l.w.Write(p)
}

var lockedMu sync.Mutex
