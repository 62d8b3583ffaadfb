package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// TestNodeConfig (issue 25 point 4): the pointer config names the pool's
// config on the server, carries the pool's token and the server's CA,
// and is what Ignition reads; the server defaults to the Service's first
// server name.
func TestNodeConfig(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	kubeconfig := writeKubeconfig(t, env.Config)
	for _, ns := range []string{"strata-system", "strata-config-server"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	const ca = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
	for _, o := range []struct {
		name string
		data map[string][]byte
	}{
		{v1alpha1.BootstrapTokenSecretName("worker"), map[string][]byte{v1alpha1.BootstrapTokenKey: []byte("s3cret")}},
		{v1alpha1.ConfigServerTLSSecret, map[string][]byte{"ca.crt": []byte(ca)}},
	} {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "strata-config-server", Name: o.name}, Data: o.data}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "worker"}}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		c := newNodeConfigCommand()
		var out bytes.Buffer
		c.SetOut(&out)
		c.SetErr(&bytes.Buffer{})
		c.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
		err := c.ExecuteContext(ctx)
		return out.String(), err
	}

	if _, err := run("worker"); err == nil || !strings.Contains(err.Error(), "--server") {
		t.Errorf("no --server and no Service: %v, want an error naming --server", err)
	}
	if _, err := run("worker", "--server", "http://config.example.com:22623"); err == nil || !strings.Contains(err.Error(), "HTTPS") {
		t.Errorf("an http server: %v, want it refused", err)
	}
	if _, err := run("nosuch", "--server", "https://config.example.com:22623"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("an unknown pool: %v", err)
	}
	if err := env.Client.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: "strata-config-server",
			Annotations: map[string]string{"machineconfiguration.strata.dev/server-names": " 10.0.0.7, config.example.com"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 22623}}},
	}); err != nil {
		t.Fatal(err)
	}
	out, err := run("worker")
	if err != nil {
		t.Fatal(err)
	}
	cfg, rpt, err := v34.Parse([]byte(out))
	if err != nil {
		t.Fatalf("not Ignition: %v %s\n%s", err, rpt, out)
	}
	m := cfg.Ignition.Config.Merge
	if len(m) != 1 || *m[0].Source != "https://10.0.0.7:22623/config/worker" {
		t.Fatalf("merge %+v", m)
	}
	if h := m[0].HTTPHeaders; len(h) != 1 || *h[0].Value != "Bearer s3cret" {
		t.Errorf("headers %+v", h)
	}
	cas := cfg.Ignition.Security.TLS.CertificateAuthorities
	if len(cas) != 1 || *cas[0].Source != "data:;base64,"+base64.StdEncoding.EncodeToString([]byte(ca)) {
		t.Errorf("CAs %+v", cas)
	}
}
