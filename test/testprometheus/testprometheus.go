// Package testprometheus runs a real Prometheus server (Debian's
// prometheus package, hack/setup-infra.sh) for tests: it evaluates rules
// the test writes, every second, so alerts fire and clear as the test
// says, and answers the HTTP API as any Prometheus does.
package testprometheus

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Server is a running Prometheus.
type Server struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL   string
	rules string
	t     testing.TB
}

// Start runs Prometheus with rules (the text of a rule file) until the
// test ends. It fails the test when the prometheus binary is missing:
// hack/setup-infra.sh installs it.
func Start(t testing.TB, rules string) *Server {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not found (hack/setup-infra.sh envtest installs Debian's package): %v", err)
	}
	dir := t.TempDir()
	s := &Server{rules: filepath.Join(dir, "rules.yaml"), t: t}
	if err := os.WriteFile(s.rules, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [" + strconv.Quote(s.rules) + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	s.URL = "http://127.0.0.1:" + strconv.Itoa(port)
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file", filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path", filepath.Join(dir, "data"), "--web.listen-address", "127.0.0.1:"+strconv.Itoa(port),
		"--web.enable-lifecycle", "--log.level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = log.Close()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-done:
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("prometheus exited: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SetRules replaces the rule file and has Prometheus reload it.
func (s *Server) SetRules(rules string) {
	s.t.Helper()
	if err := os.WriteFile(s.rules, []byte(rules), 0o644); err != nil {
		s.t.Fatal(err)
	}
	resp, err := http.Post(s.URL+"/-/reload", "", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("reload: %s", resp.Status)
	}
}

// WaitFiring waits until the alerts firing are exactly names (by
// alertname, any order, each counted once).
func (s *Server) WaitFiring(names ...string) {
	s.t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var last map[string]bool
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got, err := s.firing()
		if err == nil && equal(got, want) {
			return
		}
		last = got
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("firing alerts %v, want %v", last, want)
}

func (s *Server) firing() (map[string]bool, error) {
	resp, err := http.Get(s.URL + "/api/v1/alerts")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	got := map[string]bool{}
	for _, a := range body.Data.Alerts {
		if a.State == "firing" {
			got[a.Labels["alertname"]] = true
		}
	}
	return got, nil
}

func equal(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Rule is one alerting rule, for Rules.
type Rule struct {
	Alert, Expr, For string
	Labels           map[string]string
}

// Rules writes a rule file with one group of rules.
func Rules(rules ...Rule) string {
	out := "groups:\n- name: test\n  rules:\n"
	for _, r := range rules {
		out += fmt.Sprintf("  - alert: %s\n    expr: %s\n", r.Alert, strconv.Quote(r.Expr))
		if r.For != "" {
			out += "    for: " + r.For + "\n"
		}
		if len(r.Labels) > 0 {
			out += "    labels:\n"
			for k, v := range r.Labels {
				out += fmt.Sprintf("      %s: %s\n", k, strconv.Quote(v))
			}
		}
	}
	if len(rules) == 0 {
		out = "groups: []\n"
	}
	return out
}
