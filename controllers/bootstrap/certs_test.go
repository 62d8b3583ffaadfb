package bootstrap

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestServingCertificateRules(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	ca, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	if at, why := caFresh(ca, now); why != "" || !at.After(now.Add(6*365*24*time.Hour)) {
		t.Fatalf("new CA: renew at %v, %q", at, why)
	}
	names := []string{"strata-config-server.strata-system.svc", "127.0.0.1"}
	kp, err := newServing(ca, names, now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		ca    keyPair
		names []string
		now   time.Time
		why   string
	}{
		{"fresh", ca, names, now, ""},
		{"fresh, names in another order", ca, []string{"127.0.0.1", "strata-config-server.strata-system.svc"}, now, ""},
		{"a name added", ca, append(names, "config.example.com"), now, "names"},
		{"another CA", other, names, now, "not signed by the current CA"},
		{"two thirds of its year gone", ca, names, now.Add(245 * 24 * time.Hour), "due for renewal"},
		{"just before", ca, names, now.Add(240 * 24 * time.Hour), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, why := servingFresh(kp, tc.ca, tc.names, tc.now)
			if tc.why == "" && why != "" || tc.why != "" && !strings.Contains(why, tc.why) {
				t.Errorf("servingFresh: %q, want %q", why, tc.why)
			}
		})
	}

	// A client that trusts the CA alone reaches the server by its IP.
	cert, err := tls.X509KeyPair(kp.cert, kp.key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.cert)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	resp, err := c.Get("https://127.0.0.1:" + port)
	if err != nil {
		t.Fatalf("a client trusting the CA: %v", err)
	}
	resp.Body.Close()
	// Not the CA's: refused.
	pool2 := x509.NewCertPool()
	pool2.AppendCertsFromPEM(other.cert)
	c2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool2}}}
	if resp, err := c2.Get("https://127.0.0.1:" + port); err == nil {
		resp.Body.Close()
		t.Error("a client trusting another CA connected")
	}
}
