package configserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		for _, ns := range []string{"strata-config-server", "strata-nodes"} {
			if err := e.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return err
			}
		}
		return nil
	})
}

// syncBuffer is a log sink the server writes from its handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pool creates a pool with status.newNodes, a rendered config with one
// /var file, and the pool's token; it returns the token. The pool takes
// new nodes (spec.bootstrapToken) unless joins is false.
func pool(t *testing.T, name, img string, released, joins bool) string {
	t.Helper()
	ctx := context.Background()
	rendered := "rendered-" + name + "-1"
	mc := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: rendered}, Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{
		Raw: []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/var/lib/app/` + name + `","mode":420,"contents":{"source":"data:,pool%20` + name + `"}},{"path":"/etc/in-the-image","contents":{"source":"data:,x"}}]}}`)}}}
	p := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if joins {
		p.Spec.BootstrapToken = &v1alpha1.BootstrapToken{}
	}
	tok := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "strata-config-server", Name: v1alpha1.BootstrapTokenSecretName(name),
			Labels: map[string]string{v1alpha1.BootstrapTokenLabel: name}},
		Data: map[string][]byte{v1alpha1.BootstrapTokenKey: []byte("token-of-" + name)},
	}
	if err := env.Client.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if released {
		p.Status.NewNodes = &v1alpha1.NewNodeStatus{Image: img, Config: rendered}
		if err := env.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, tok); err != nil {
		t.Fatal(err)
	}
	return string(tok.Data[v1alpha1.BootstrapTokenKey])
}

// TestServer (issue 25 points 1 and 2): only the pool's token gets the
// pool's config; everything else gets nothing, is logged without the
// token and counted.
func TestServer(t *testing.T) {
	ctx := context.Background()
	tokA := pool(t, "srv-a", image, true, true)
	tokB := pool(t, "srv-b", image, true, true)
	tokC := pool(t, "srv-c", "", false, true)
	tokE := pool(t, "srv-e", image, true, false)
	// A Secret of the token's name that the controller did not make.
	if err := env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "strata-config-server", Name: v1alpha1.BootstrapTokenSecretName("srv-d")},
		Data:       map[string][]byte{v1alpha1.BootstrapTokenKey: []byte("planted")},
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "srv-d"},
		Spec: v1alpha1.MachineConfigPoolSpec{BootstrapToken: &v1alpha1.BootstrapToken{}}}); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	srv := httptest.NewTLSServer(&Server{
		Client: env.Client, Namespace: "strata-config-server", NodeNamespace: "strata-nodes",
		DaemonImage: func(context.Context) (string, error) { return "registry.example.com/strata/strata-daemon:v1", nil },
		Log:         funcr.New(func(prefix, args string) { _, _ = logs.Write([]byte(args + "\n")) }, funcr.Options{}),
	})
	defer srv.Close()

	get := func(path, auth string) (int, http.Header, []byte) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, body
	}
	before := map[string]float64{}
	for _, r := range []string{resultServed, resultUnauthorized, resultForbidden, resultUnavailable, resultNotFound} {
		before[r] = testutil.ToFloat64(requests.WithLabelValues(r))
	}
	for _, tc := range []struct {
		name, path, auth string
		code             int
		result           string
	}{
		{"no token", "/config/srv-a", "", http.StatusUnauthorized, resultUnauthorized},
		{"not a bearer token", "/config/srv-a", "Basic " + tokA, http.StatusUnauthorized, resultUnauthorized},
		{"a wrong token", "/config/srv-a", "Bearer nope", http.StatusForbidden, resultForbidden},
		{"another pool's token", "/config/srv-a", "Bearer " + tokB, http.StatusForbidden, resultForbidden},
		{"a token's prefix", "/config/srv-a", "Bearer " + tokA[:len(tokA)-1], http.StatusForbidden, resultForbidden},
		{"an unknown pool answers as a wrong token", "/config/nosuch", "Bearer " + tokA, http.StatusForbidden, resultForbidden},
		{"a Secret the controller did not make", "/config/srv-d", "Bearer planted", http.StatusForbidden, resultForbidden},
		{"a pool that takes no new nodes, with a token left", "/config/srv-e", "Bearer " + tokE, http.StatusForbidden, resultForbidden},
		{"nothing released for new nodes yet", "/config/srv-c", "Bearer " + tokC, http.StatusServiceUnavailable, resultUnavailable},
		{"not a config path", "/metrics", "Bearer " + tokA, http.StatusNotFound, resultNotFound},
		{"the pool's token", "/config/srv-a", "Bearer " + tokA, http.StatusOK, resultServed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, body := get(tc.path, tc.auth)
			if code != tc.code {
				t.Fatalf("%s: %d %s, want %d", tc.path, code, body, tc.code)
			}
			if code == http.StatusUnauthorized && !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge: %v", hdr)
			}
			if code != http.StatusOK {
				if bytes.Contains(body, []byte("srv-")) || bytes.Contains(body, []byte("/var")) {
					t.Errorf("a refusal says more than its status: %s", body)
				}
				return
			}
			cfg, rpt, err := v34.Parse(body)
			if err != nil {
				t.Fatalf("served config: %v %s", err, rpt)
			}
			var paths []string
			for _, f := range cfg.Storage.Files {
				paths = append(paths, f.Path)
			}
			if len(paths) != 1 || paths[0] != "/var/lib/app/srv-a" {
				t.Errorf("files %v, want only the pool's /var file (/etc belongs to the image)", paths)
			}
			if len(cfg.Systemd.Units) != 1 || !strings.Contains(*cfg.Systemd.Units[0].Contents, "--image="+image) {
				t.Errorf("units %s, want the first-boot unit switching to %s", mustJSON(cfg.Systemd.Units), image)
			}
		})
	}
	for r, n := range map[string]float64{resultServed: 1, resultUnauthorized: 2, resultForbidden: 6, resultUnavailable: 1, resultNotFound: 1} {
		if got := testutil.ToFloat64(requests.WithLabelValues(r)) - before[r]; got != n {
			t.Errorf("strata_config_server_requests_total{result=%q} went up by %v, want %v", r, got, n)
		}
	}
	out := logs.String()
	for _, tok := range []string{tokA, tokB, tokC, tokE, "planted", "nope"} {
		if strings.Contains(out, tok) {
			t.Errorf("a token is in the log:\n%s", out)
		}
	}
	if n := strings.Count(out, "Refused a config request"); n != 10 {
		t.Errorf("%d refusals logged, want 10:\n%s", n, out)
	}
	if !strings.Contains(out, `"pool"="srv-a"`) || !strings.Contains(out, `"result"="forbidden"`) {
		t.Errorf("the log does not name pool and result:\n%s", out)
	}
}

// TestTokenLifetimes (issue 37 finding 9): a pool's current token works
// for rotationPeriod + rotationOverlap from its making, whether or not
// the controller replaced it; the token a rotation replaced works until
// the expiry written beside it, then not.
func TestTokenLifetimes(t *testing.T) {
	ctx := context.Background()
	p := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "srv-rot"}, Spec: v1alpha1.MachineConfigPoolSpec{
		BootstrapToken: &v1alpha1.BootstrapToken{RotationPeriod: &metav1.Duration{Duration: time.Hour}, RotationOverlap: &metav1.Duration{Duration: 10 * time.Minute}}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	rendered := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "rendered-srv-rot-1"}, Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"}}`)}}}
	if err := env.Client.Create(ctx, rendered); err != nil {
		t.Fatal(err)
	}
	p.Status.NewNodes = &v1alpha1.NewNodeStatus{Config: rendered.Name}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "strata-config-server", Name: v1alpha1.BootstrapTokenSecretName(p.Name),
			Labels: map[string]string{v1alpha1.BootstrapTokenLabel: p.Name}},
		Data: map[string][]byte{v1alpha1.BootstrapTokenKey: []byte("current"), v1alpha1.PreviousBootstrapTokenKey: []byte("previous")},
	}
	// The previous token's expiry, set by the rotation that made sec.
	sec.Annotations = map[string]string{v1alpha1.PreviousTokenExpiresAnnotation: time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)}
	if err := env.Client.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	made := sec.CreationTimestamp.Time
	var now time.Time
	srv := httptest.NewTLSServer(&Server{
		Client: env.Client, Namespace: "strata-config-server", NodeNamespace: "strata-nodes",
		DaemonImage: func(context.Context) (string, error) { return "", nil },
		Log:         logr.Discard(),
		Now:         func() time.Time { return now },
	})
	defer srv.Close()
	for _, tc := range []struct {
		name  string
		at    time.Duration // after the Secret was made
		token string
		code  int
	}{
		{"the current token", time.Minute, "current", http.StatusOK},
		{"the previous token within the overlap", time.Minute, "previous", http.StatusOK},
		{"the previous token after its expiry", 6 * time.Minute, "previous", http.StatusForbidden},
		{"the current token when due but not replaced, within the overlap", 65 * time.Minute, "current", http.StatusOK},
		{"the current token past rotationPeriod + rotationOverlap", 71 * time.Minute, "current", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now = made.Add(tc.at)
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/config/"+p.Name, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tc.token)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("token %q %v after it was made: %d, want %d", tc.token, tc.at, resp.StatusCode, tc.code)
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
