package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// TestControllerLogs runs the built controller against a real apiserver
// and reads its log as an operator's log pipeline would: every line a
// JSON object, a pool's new rendered config an entry with the pool and
// the config's name, and --zap-log-level=debug adding the V(1) detail.
func TestControllerLogs(t *testing.T) {
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
	cmd := exec.Command(bin, "--config", config, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=debug")
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kubeconfig)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var mu sync.Mutex
	var lines []string
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	// find returns the first entry with msg and the given values, failing
	// the test at any line that is not a JSON object.
	find := func(msg string, want map[string]string) (map[string]any, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, line := range lines {
			var e map[string]any
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("log line %q is not JSON: %v", line, err)
			}
			if e["msg"] != msg {
				continue
			}
			ok := true
			for k, v := range want {
				ok = ok && fmt.Sprint(e[k]) == v
			}
			if ok {
				return e, nil
			}
		}
		return nil, fmt.Errorf("no %q with %v in %d lines:\n%s", msg, want, len(lines), strings.Join(lines, "\n"))
	}
	wait := func(msg string, want map[string]string) map[string]any {
		t.Helper()
		var e map[string]any
		testenv.Eventually(t, 30*time.Second, "log "+msg, func() (err error) {
			e, err = find(msg, want)
			return err
		})
		return e
	}

	wait("Starting", map[string]string{"logger": "setup", "level": "info", "buildNamespace": "strata-system"})
	ctx := context.Background()
	pool := &v1alpha1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: "logged"},
		Spec:       v1alpha1.MachineConfigPoolSpec{MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"logged": "true"}}},
	}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	mc := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "logged-a", Labels: map[string]string{"logged": "true"}},
		Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
			`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/logged","contents":{"source":"data:,1"}}]}}`)}},
	}
	if err := env.Client.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	e := wait("Pool has a new rendered config", map[string]string{"controller": "render", "name": "logged", "sources": "1", "level": "info"})
	rendered, _ := e["renderedConfig"].(string)
	if !strings.HasPrefix(rendered, "rendered-logged-") {
		t.Errorf("renderedConfig %q, want the rendered config's name", rendered)
	}
	wait("Created rendered config", map[string]string{"controller": "render", "renderedConfig": rendered, "level": "debug"})
}

// TestControllerNeedsBuilderImage: without a builder no MachineOSConfig
// can be built, and the controller says so instead of ignoring them all.
func TestControllerNeedsBuilderImage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "strata-controller")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--metrics-bind-address=0", "--health-probe-bind-address=0").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "build.builderImage") {
		t.Errorf("strata-controller without a builder image: %v, output %q; want a non-zero exit naming build.builderImage", err, out)
	}
}

// TestConfigServerNamespaceRefused: the config server may read every
// Secret of strata-config-server, so neither the build Secrets nor the
// node pull secrets may be put there; the controller refuses to start,
// naming the setting.
func TestConfigServerNamespaceRefused(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "strata-controller")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte("build:\n  namespace: strata-config-server\n  builderImage: registry.example.com/builder:v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for setting, args := range map[string][]string{
		"build.namespace":              {"--config", config},
		"--node-pull-secret-namespace": {"--node-pull-secret-namespace=strata-config-server"},
	} {
		out, err := exec.Command(bin, append(args, "--metrics-bind-address=0", "--health-probe-bind-address=0")...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !strings.Contains(string(out), setting+" strata-config-server is the config server's namespace") {
			t.Errorf("%s strata-config-server: %v, output %q; want a non-zero exit naming it", setting, err, out)
		}
	}
}

// TestReadinessWaitsForTheCaches: the readiness check fails while the
// cache has not started, and while an informer cannot list what it
// watches (here for want of RBAC), and passes once it has.
func TestReadinessWaitsForTheCaches(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const user = "strata-readiness-test"
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := cache.New(cfg, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	check := cacheSynced(c)
	probe := func() error { return check(httptest.NewRequest(http.MethodGet, "/readyz", nil)) }
	if err := probe(); err == nil {
		t.Fatal("ready before the cache started")
	}
	if _, err := c.GetInformer(ctx, &corev1.Node{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	// The user may not list Nodes: however long the informer tries, the
	// check must keep failing.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		if err := probe(); err == nil {
			t.Fatal("ready while the Node informer cannot list Nodes")
		} else if !strings.Contains(err.Error(), "not synced") {
			t.Fatalf("readiness error %q does not say what it waits for", err)
		}
	}

	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// The reflector retries with a backoff of up to 30 s.
	testenv.Eventually(t, time.Minute, "ready once Nodes can be listed", probe)
}

// TestShippedConfigs: the configuration files the manifests mount parse
// strictly (a misspelt field would stop the controller at start) and
// name a builder image and a boot disk image.
func TestShippedConfigs(t *testing.T) {
	for _, p := range []string{
		"../../config/manager/controller-config.yaml",
		"../../config/testcluster/controller-config.yaml",
	} {
		fc, err := loadConfig(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fc.Build.BuilderImage == "" || fc.Build.BootDiskImage == "" || fc.Build.Namespace != "strata-system" {
			t.Errorf("%s: builderImage %q, bootDiskImage %q, namespace %q; want a builder and a boot disk image and strata-system",
				p, fc.Build.BuilderImage, fc.Build.BootDiskImage, fc.Build.Namespace)
		}
	}
}

// TestRenamedInstallRefused: Strata's install namespace cannot be
// renamed, and both ways to try say so. A kustomize overlay that sets
// another namespace on config/default fails to build (it would fold
// strata-nodes and default into it, and their Roles collide); a
// controller installed in another namespace some other way (here
// config/manager under an overlay) sees it through the downward API and
// refuses to start, naming both namespaces.
func TestRenamedInstallRefused(t *testing.T) {
	if _, err := renamed(t, "config/default"); err == nil || !strings.Contains(err.Error(), "namespace transformation produces ID conflict") {
		t.Errorf("config/default under namespace renamed: %v, want kustomize's refusal", err)
	}
	objs, err := renamed(t, "config/manager")
	if err != nil {
		t.Fatal(err)
	}
	var podNamespace string
	for _, raw := range objs {
		var d appsv1.Deployment
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind != "Deployment" || d.Name != "strata-controller" {
			continue
		}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
				// The downward API gives the pod its namespace.
				podNamespace = d.Namespace
			}
		}
	}
	if podNamespace != "renamed" {
		t.Fatalf("the renamed controller sees POD_NAMESPACE %q, want renamed (from the downward API)", podNamespace)
	}
	err = checkNamespace(podNamespace)
	if err == nil || !strings.Contains(err.Error(), "runs in namespace renamed") || !strings.Contains(err.Error(), "install namespace is strata-system") {
		t.Errorf("controller in namespace renamed: %v, want a refusal naming renamed and strata-system", err)
	}
	if err := checkNamespace("strata-system"); err != nil {
		t.Errorf("controller in strata-system: %v", err)
	}
	if err := checkNamespace(""); err != nil {
		t.Errorf("controller outside a pod: %v", err)
	}
}

// renamed builds the kustomization dir (relative to the repository root)
// under an overlay that sets namespace renamed, and returns its objects
// as JSON.
func renamed(t *testing.T, dir string) ([][]byte, error) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	base, err := filepath.Rel(overlay, filepath.Join(root, filepath.FromSlash(dir)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), fmt.Appendf(nil, "namespace: renamed\nresources:\n- %s\n", base), 0o644); err != nil {
		t.Fatal(err)
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, r := range rm.Resources() {
		raw, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	return out, nil
}
