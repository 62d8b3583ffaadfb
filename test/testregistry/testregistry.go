// Package testregistry runs a registry on a free loopback port for a
// test, optionally behind a password, and stops it and removes its storage
// when the test ends, passed or not.
//
// Start runs distribution (the binary hack/setup-infra.sh builds into
// .infra/bin), the registry of the test cluster: it does not serve the OCI
// 1.1 referrers API, so clients list referrers through the referrers tag
// schema (a sha256-<hex> tag). StartReferrers runs go-containerregistry's
// registry in the test's process, which serves the referrers API and keeps
// everything in memory.
package testregistry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"golang.org/x/crypto/bcrypt"

	"github.com/strata-dev/strata/test/testenv"
)

// Registry is a running test registry.
type Registry struct {
	// Host is 127.0.0.1:port.
	Host string
	// User and Password are set when the registry requires a login.
	User, Password string
	// Referrers is true when the registry serves the referrers API
	// (/v2/<name>/referrers/<digest>).
	Referrers bool

	// conf is distribution's configuration file; stop stops its process.
	conf string
	stop func()
	logs *syncBuffer
}

// Auth is the registry's credentials for go-containerregistry.
func (r *Registry) Auth() authn.Authenticator {
	if r.User == "" {
		return authn.Anonymous
	}
	return &authn.Basic{Username: r.User, Password: r.Password}
}

// DockerConfigJSON is a kubernetes.io/dockerconfigjson Secret's
// .dockerconfigjson for the registry with the given password.
func (r *Registry) DockerConfigJSON(password string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(r.User + ":" + password))
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{r.Host: map[string]string{"auth": auth}}})
	return b
}

// Binary finds the registry: on PATH (the Makefile puts .infra/bin there)
// or in the repository's .infra/bin. A missing binary fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("registry"); err == nil {
		return p
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, ".infra", "bin", "registry")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("registry binary not found on PATH or at %s: run 'make infra'", p)
	}
	return p
}

// Start runs a registry until the test ends; with a password it requires
// a login as user "strata".
func Start(t testing.TB, password string) *Registry {
	t.Helper()
	dir := t.TempDir()
	reg := &Registry{}
	authConf := ""
	if password != "" {
		reg.User, reg.Password = "strata", password
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(reg.User+":"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		authConf = fmt.Sprintf("auth:\n  htpasswd:\n    realm: strata-test\n    path: %s\n", htpasswd)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg.Host = l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n%s",
		filepath.Join(dir, "data"), reg.Host, authConf)
	confPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}

	reg.conf = confPath
	logs := &syncBuffer{}
	t.Cleanup(func() {
		reg.Stop(t)
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	reg.logs = logs
	reg.serve(t)
	return reg
}

// Stop stops a registry Start started, keeping its storage, until Restart.
func (r *Registry) Stop(t testing.TB) {
	t.Helper()
	if r.conf == "" {
		t.Fatal("only a distribution registry (Start) can be stopped and restarted")
	}
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
}

// Restart starts a stopped registry again, on the same port with the same
// storage.
func (r *Registry) Restart(t testing.TB) {
	t.Helper()
	r.Stop(t)
	r.serve(t)
}

// serve runs the registry process and waits until it answers.
func (r *Registry) serve(t testing.TB) {
	t.Helper()
	cmd := exec.Command(Binary(t), "serve", r.conf)
	// REGISTRY_* variables would override the configuration; tracing
	// exports fail every few seconds without a collector.
	env := []string{"OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true"}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "REGISTRY_") && !strings.HasPrefix(e, "OTEL_") {
			env = append(env, e)
		}
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start registry: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	r.stop = func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + r.Host + "/v2/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("registry exited (%v)\n%s", cmd.ProcessState, r.logs.String())
		case <-time.After(50 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry on %s not ready in 15s (last error %v)\n%s", r.Host, err, r.logs.String())
		}
	}
}
