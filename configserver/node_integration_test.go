package configserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// create creates objs, ignoring those that exist (the apiserver is the
// package's).
func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// boundToken is a token of ServiceAccount strata-system/sa for audiences,
// bound to a pod of that ServiceAccount on node (none when node is "").
func boundToken(t *testing.T, sa, node string, audiences ...string) string {
	t.Helper()
	ctx := context.Background()
	acct := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: sa}}
	create(t, acct)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr(int64(600))}}
	if node != "" {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: sa + "-on-" + node},
			Spec: corev1.PodSpec{
				ServiceAccountName: sa,
				NodeName:           node,
				Containers:         []corev1.Container{{Name: "daemon", Image: "example.com/daemon"}},
			},
		}
		create(t, pod)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			t.Fatal(err)
		}
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	if err := env.Client.SubResource("token").Create(ctx, acct, tr); err != nil {
		t.Fatalf("token of %s: %v", sa, err)
	}
	return tr.Status.Token
}

func TestNodeServerServesOnlyTheCallersOwn(t *testing.T) {
	ctx := context.Background()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "strata-system"}})
	rendered := func(name, pool string) *v1alpha1.MachineConfig {
		return &v1alpha1.MachineConfig{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.PoolLabel: pool}},
			Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
				`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/var/lib/` + name + `","contents":{"source":"data:,` + name + `"}}]}}`)}},
		}
	}
	pull := func(name, value string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "strata-nodes", Name: name}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"example.com":{"auth":"` + value + `"}}}`)}}
	}
	node := func(name, pool, config, stage, secret string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			v1alpha1.NodePoolAnnotation:           pool,
			v1alpha1.DesiredConfigAnnotation:      config,
			v1alpha1.DesiredStageConfigAnnotation: stage,
			v1alpha1.ImagePullSecretAnnotation:    secret,
		}}}
	}
	create(t,
		rendered("rendered-na-1", "na"), rendered("rendered-na-0", "na"), rendered("rendered-na-2", "na"),
		rendered("rendered-nb-1", "nb"),
		// Not of a pool: another pool's source config, say.
		rendered("nb-source", ""),
		pull("pull-na", "secret-of-na"), pull("pull-nb", "secret-of-nb"),
		node("node-a", "na", "rendered-na-1", "rendered-na-2", "pull-na"),
		node("node-b", "nb", "rendered-nb-1", "", "pull-nb"),
		// A node of pool na whose stage names another pool's config
		// (moved pools): named, so served.
		node("node-moving", "na", "rendered-na-1", "rendered-nb-1", "pull-na"),
	)

	logs := &syncBuffer{}
	srv := httptest.NewServer(&NodeServer{
		Client:        env.Client,
		Nodes:         env.Client,
		Reviews:       env.Client,
		NodeNamespace: "strata-nodes",
		DaemonUser:    DaemonUser("strata-system", "strata-daemon"),
		Log:           funcr.New(func(p, a string) { _, _ = io.WriteString(logs, p+" "+a+"\n") }, funcr.Options{}),
	})
	defer srv.Close()
	get := func(path, token string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}

	onA := boundToken(t, "strata-daemon", "node-a", NodeTokenAudience)
	mc := NodeMachineConfigPath
	ps := NodePullSecretPath
	for _, tc := range []struct {
		what, path, token string
		want              int
		body              string
	}{
		{"its desired config", mc + "rendered-na-1", onA, http.StatusOK, "/var/lib/rendered-na-1"},
		{"its stage config", mc + "rendered-na-2", onA, http.StatusOK, "/var/lib/rendered-na-2"},
		{"another config of its pool (its current one)", mc + "rendered-na-0", onA, http.StatusOK, "/var/lib/rendered-na-0"},
		{"its pull secret", ps + "pull-na", onA, http.StatusOK, "secret-of-na"},
		{"another pool's rendered config", mc + "rendered-nb-1", onA, http.StatusForbidden, ""},
		{"a config of no pool", mc + "nb-source", onA, http.StatusForbidden, ""},
		{"a config that does not exist", mc + "rendered-nx-1", onA, http.StatusForbidden, ""},
		{"another node's pull secret", ps + "pull-nb", onA, http.StatusForbidden, ""},
		{"a secret that does not exist", ps + "pull-nx", onA, http.StatusForbidden, ""},
		{"the stage config of a node that moved pools", mc + "rendered-nb-1", boundToken(t, "strata-daemon", "node-moving", NodeTokenAudience), http.StatusOK, "/var/lib/rendered-nb-1"},
		{"node b's own", mc + "rendered-nb-1", boundToken(t, "strata-daemon", "node-b", NodeTokenAudience), http.StatusOK, "/var/lib/rendered-nb-1"},
		{"another ServiceAccount's token bound to a pod on node a", mc + "rendered-na-1", boundToken(t, "strata-other", "node-a", NodeTokenAudience), http.StatusForbidden, ""},
		{"the daemon's token bound to no pod", mc + "rendered-na-1", boundToken(t, "strata-daemon", "", NodeTokenAudience), http.StatusForbidden, ""},
		{"the daemon's token for the API server", mc + "rendered-na-1", boundToken(t, "strata-daemon", "node-a"), http.StatusUnauthorized, ""},
		{"a token that is none", mc + "rendered-na-1", "not-a-token", http.StatusUnauthorized, ""},
		{"no token", mc + "rendered-na-1", "", http.StatusUnauthorized, ""},
		{"not a node input", NodePathPrefix + "nodes/node-a", onA, http.StatusNotFound, ""},
	} {
		code, body := get(tc.path, tc.token)
		if code != tc.want {
			t.Errorf("%s: GET %s = %d %s, want %d", tc.what, tc.path, code, body, tc.want)
			continue
		}
		if tc.want != http.StatusOK {
			if strings.Contains(string(body), "secret-of") || strings.Contains(string(body), "/var/lib") {
				t.Errorf("%s: refusal carries content: %s", tc.what, body)
			}
			continue
		}
		if !strings.Contains(string(body), tc.body) {
			t.Errorf("%s: GET %s = %s, want it to hold %q", tc.what, tc.path, body, tc.body)
		}
		if strings.HasPrefix(tc.path, mc) {
			var got v1alpha1.MachineConfig
			if err := json.Unmarshal(body, &got); err != nil || got.Name != strings.TrimPrefix(tc.path, mc) {
				t.Errorf("%s: not the MachineConfig: %v %s", tc.what, err, body)
			}
		}
	}
	if l := logs.String(); strings.Contains(l, onA) || strings.Contains(l, "secret-of") {
		t.Errorf("the log holds a token or a secret:\n%s", l)
	}
}

// TestNodeClientReadsItsOwnThroughTheServer: the daemon's client reads
// its node's rendered config and pull secret over TLS with the token
// and CA files it is given, a renewed token included, and another
// pool's config is an error that carries no content.
func TestNodeClientReadsItsOwnThroughTheServer(t *testing.T) {
	ctx := context.Background()
	create(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "strata-system"}},
		&v1alpha1.MachineConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "rendered-nc-1", Labels: map[string]string{v1alpha1.PoolLabel: "nc"}},
			Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"}}`)}},
		},
		&v1alpha1.MachineConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "rendered-nd-1", Labels: map[string]string{v1alpha1.PoolLabel: "nd"}},
			Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"},"passwd":{}}`)}},
		},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "strata-nodes", Name: "pull-nc"},
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-c", Annotations: map[string]string{
			v1alpha1.NodePoolAnnotation:        "nc",
			v1alpha1.DesiredConfigAnnotation:   "rendered-nc-1",
			v1alpha1.ImagePullSecretAnnotation: "pull-nc",
		}}},
	)
	srv := httptest.NewTLSServer(&NodeServer{
		Client: env.Client, Nodes: env.Client, Reviews: env.Client,
		NodeNamespace: "strata-nodes",
		DaemonUser:    DaemonUser("strata-system", "strata-daemon"),
		Log:           funcr.New(func(p, a string) { t.Log(p, a) }, funcr.Options{}),
	})
	defer srv.Close()
	dir := t.TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(boundToken(t, "strata-daemon", "node-c", NodeTokenAudience)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &NodeClient{URL: srv.URL, CAFile: caFile, TokenFile: tokenFile}
	mc, err := c.MachineConfig(ctx, "rendered-nc-1")
	if err != nil || mc.Name != "rendered-nc-1" || string(mc.Spec.Config.Raw) != `{"ignition":{"version":"3.4.0"}}` {
		t.Fatalf("MachineConfig = %+v, %v; want rendered-nc-1", mc, err)
	}
	if data, err := c.PullSecret(ctx, "pull-nc"); err != nil || string(data) != `{"auths":{}}` {
		t.Fatalf("PullSecret = %q, %v", data, err)
	}
	if _, err := c.MachineConfig(ctx, "rendered-nd-1"); err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "passwd") {
		t.Errorf("another pool's config: %v, want a 403 without its content", err)
	}
	// The kubelet renewed the token: the next request sends the new one.
	if err := os.WriteFile(tokenFile, []byte("renewed-but-not-a-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PullSecret(ctx, "pull-nc"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("with a token that is none: %v, want 401", err)
	}
	// Another CA: the server is not trusted.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PullSecret(ctx, "pull-nc"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("with another CA: %v, want a certificate error", err)
	}
}
