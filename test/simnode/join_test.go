package simnode

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/configserver"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/testenv"
	"github.com/strata-dev/strata/test/testregistry"
)

// writeKubeconfig writes env's credentials for the daemons.
func writeKubeconfig(t *testing.T, env *testenv.Env, path string) {
	t.Helper()
	c := env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// TestJoinNode (issue 25 points 1, 5 and 6) on the simulator, with a real
// apiserver, registry and config server: a node installed from the base
// image fetches its pool's config with the pointer config stratactl
// prints, applies it as Ignition does, and its first boot switches it to
// the pool's digest with one reboot before its kubelet starts, so that
// its Node is registered on the pool's image; a node installed with the
// pool's image does not reboot; another pool's token gets nothing.
func TestJoinNode(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	kwokDone := make(chan struct{})
	go func() { defer close(kwokDone); kwok(ctx, t, cs) }()
	defer func() { cancel(); <-kwokDone }()
	for _, ns := range []string{"strata-config-server", "strata-nodes"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	reg := testregistry.Start(t, "")
	push := func(tag string) string {
		img, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, map[string]string{"etc/strata-image": tag + "\n"}))
		if err != nil {
			t.Fatal(err)
		}
		return reg.Push(t, "strata/os:"+tag, img)
	}
	base, current := push("base"), push("worker")

	// The pool as the controllers leave it: a rendered config with a
	// /var file, status.newNodes, a MachineOSConfig with a node pull
	// secret copied to strata-nodes, the pool's token and another pool's.
	rendered := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "rendered-join-1"}, Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{
		Raw: []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/var/lib/app/conf","mode":420,"contents":{"source":"data:,joined%0A"}}]}}`)}}}
	if err := env.Client.Create(ctx, rendered); err != nil {
		t.Fatal(err)
	}
	pool := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "join", Annotations: map[string]string{v1alpha1.LayeredByAnnotation: "join"}},
		Spec: v1alpha1.MachineConfigPoolSpec{BootstrapToken: &v1alpha1.BootstrapToken{}}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pool.Status.NewNodes = &v1alpha1.NewNodeStatus{Image: current, Config: rendered.Name}
	if err := env.Client.Status().Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	mosc := &v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: "join"}, Spec: v1alpha1.MachineOSConfigSpec{
		MachineConfigPool:       v1alpha1.LocalObjectReference{Name: "join"},
		ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
		RenderedImagePushSecret: v1alpha1.SecretReference{Name: "push"},
		RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "pull"},
		RenderedImagePushSpec:   reg.Host + "/strata/os:worker",
		BaseImagePullSpec:       base,
	}}
	if err := env.Client.Create(ctx, mosc); err != nil {
		t.Fatal(err)
	}
	pullSecret := reg.DockerConfigJSON("unused")
	tokens := map[string]string{"join": "join-token", "other": "other-token"}
	for p, tok := range tokens {
		if err := env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "strata-config-server", Name: v1alpha1.BootstrapTokenSecretName(p), Labels: map[string]string{v1alpha1.BootstrapTokenLabel: p}},
			Data:       map[string][]byte{v1alpha1.BootstrapTokenKey: []byte(tok)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "strata-nodes", Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: pullSecret},
	}); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewTLSServer(&configserver.Server{
		Client: env.Client, Namespace: "strata-config-server", NodeNamespace: "strata-nodes",
		DaemonImage: func(context.Context) (string, error) { return "127.0.0.1:5000/strata/strata-daemon:test", nil },
		Log:         logr.Discard(),
	})
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	pointer := func(tok string) []byte {
		b, err := json.Marshal(configserver.Pointer(srv.URL, "join", ca, []byte(tok)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var httpErr *HTTPError
	if _, err := FetchIgnition(ctx, pointer(tokens["other"])); !errors.As(err, &httpErr) || httpErr.Code != http.StatusForbidden {
		t.Fatalf("another pool's token: %v, want 403", err)
	}
	if _, err := FetchIgnition(ctx, pointer("")); !errors.As(err, &httpErr) || httpErr.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %v, want 401", err)
	}
	config, err := FetchIgnition(ctx, pointer(tokens["join"]))
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	daemon, sim, err := Build(ctx, root, filepath.Join(dir, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, env, kubeconfig)
	var logs bytes.Buffer
	c, err := New(ctx, Config{Kubeconfig: kubeconfig, Daemon: daemon, BootcSim: sim, OriginalImage: base,
		Dir: filepath.Join(dir, "nodes"), Log: &syncWriter{w: &logs}, Timeout: time.Minute, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Log(logs.String())
		}
	}()

	for _, tc := range []struct {
		name, install string
		reboots       int
	}{
		{"installed from the base", base, 1},
		{"installed with the pool's image", current, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res, err := c.JoinNode(ctx, tc.install, config, map[string]string{"pool": "join"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("node %s: %d reboots, registered after %v", res.Name, res.Reboots, res.Registered.Sub(start).Round(time.Millisecond))
			if res.Reboots != tc.reboots {
				t.Errorf("%d reboots, want %d", res.Reboots, tc.reboots)
			}
			nodeRoot := c.Root(res.Name)
			s, err := bootcsim.New(nodeRoot)
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Status.Booted.Digest(); got != bootc.DigestOf(current) {
				t.Errorf("booted %s, want the pool's %s", got, bootc.DigestOf(current))
			}
			if b, err := os.ReadFile(filepath.Join(nodeRoot, "var/lib/app/conf")); err != nil || string(b) != "joined\n" {
				t.Errorf("the pool's /var file: %q, %v", b, err)
			}
			if _, err := os.Stat(filepath.Join(nodeRoot, configserver.FirstbootAuthFile)); !os.IsNotExist(err) {
				t.Errorf("the first boot's pull secret is still there: %v", err)
			}
			if _, err := os.Stat(filepath.Join(nodeRoot, configserver.FirstbootDoneFile)); err != nil {
				t.Errorf("first boot not marked done: %v", err)
			}
			// The node's daemon, once it runs, reports the image it
			// was installed with as its original image, and the pool's
			// as current.
			testenv.Eventually(t, 30*time.Second, "the daemon's report", func() error {
				n, err := cs.CoreV1().Nodes().Get(ctx, res.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				a := n.Annotations
				if a[v1alpha1.OriginalImageAnnotation] != tc.install || a[v1alpha1.CurrentImageAnnotation] != current {
					return fmt.Errorf("originalImage %q currentImage %q", a[v1alpha1.OriginalImageAnnotation], a[v1alpha1.CurrentImageAnnotation])
				}
				return nil
			})
		})
	}
}
