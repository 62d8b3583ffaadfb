// Package testenv starts the real kube-apiserver and etcd that Strata's
// integration tests run against (controller-runtime's envtest), with the
// Strata CRDs installed. The binaries are the ones hack/setup-infra.sh
// builds from source into .infra/bin; nothing is downloaded.
package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/strata-dev/strata/internal/scheme"
)

// Env is a running apiserver with the Strata CRDs.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	CRDs   []*apiextensionsv1.CustomResourceDefinition
}

// RepoRoot is the directory holding the module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Scheme knows the built-in kinds, Strata's and CRDs.
func Scheme() *runtime.Scheme {
	s := scheme.New()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// assetsDir finds kube-apiserver and etcd: KUBEBUILDER_ASSETS when set (the
// Makefile sets it), else the repository's .infra/bin.
func assetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, ".infra", "bin")
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%s not found in %s: run 'make infra' (hack/setup-infra.sh) to build it", name, dir)
		}
	}
	return dir, nil
}

// Start starts an apiserver for the test and stops it when the test ends,
// whether it passed or not. A missing binary fails the test: an integration
// test that silently skips proves nothing.
func Start(t testing.TB) *Env {
	t.Helper()
	env, stop, err := StartMain()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(stop)
	return env
}

// StartMain is Start for a TestMain that shares one apiserver across a
// package's tests. The caller must call stop.
func StartMain() (*Env, func(), error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	assets, err := assetsDir()
	if err != nil {
		return nil, nil, err
	}
	scheme := Scheme()
	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		Scheme:                scheme,
	}
	cfg, err := te.Start()
	if err != nil {
		// Start leaves etcd and the apiserver running when a later step
		// fails (a CRD the apiserver refuses): stop them here.
		_ = te.Stop()
		return nil, nil, err
	}
	stop := func() { _ = te.Stop() }
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, CRDs: te.CRDs}, stop, nil
}

// RunMain is a package's TestMain: it starts one apiserver for the
// package's tests, hands it to set (which may prepare shared objects),
// runs the tests and stops the apiserver whatever they did.
func RunMain(m *testing.M, set func(*Env) error) {
	env, stop, err := StartMain()
	if err != nil {
		// A missing apiserver is a broken setup, not a reason to skip.
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		os.Exit(1)
	}
	if err := set(env); err != nil {
		fmt.Fprintln(os.Stderr, "prepare envtest:", err)
		stop()
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// StartManager runs a controller manager against the apiserver until the
// test ends, or until stop is called (a crash, for restart tests). setup
// registers the reconcilers under test.
func (e *Env) StartManager(t testing.TB, opts ctrl.Options, setup func(ctrl.Manager) error) (stop func()) {
	t.Helper()
	opts.Scheme = e.Scheme
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	// Each test starts its own manager with the same controller names.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(e.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// Eventually polls check until it returns nil, failing the test with the
// last error when timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronisation
	}
	t.Fatalf("%s: not reached within %s: %v", what, timeout, err)
}
