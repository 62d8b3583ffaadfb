package testregistry

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// StartReferrers runs go-containerregistry's registry with the referrers
// API on, on a free loopback port, until the test ends; with a password
// it requires a login as user "strata", by HTTP basic authentication as
// distribution's htpasswd does, so that clients go through the same
// challenge and credentials.
func StartReferrers(t testing.TB, password string) *Registry {
	t.Helper()
	reg := &Registry{Referrers: true}
	logs := &syncBuffer{}
	h := registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(logs, "", log.Ltime)))
	if password != "" {
		reg.User, reg.Password = "strata", password
		h = basicAuth(reg.User, password, h)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg.Host = l.Addr().String()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("registry on %s: %v", reg.Host, err)
		}
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	return reg
}

// basicAuth answers every request without user and password with
// distribution's challenge.
func basicAuth(user, password string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="strata-test"`)
			w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// syncBuffer is the registry's log: its handlers write from many
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
