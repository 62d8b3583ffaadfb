//go:build e2e

package e2e

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/configserver"
	"github.com/strata-dev/strata/controllers/bootstrap"
)

// A daemon reads its node's rendered configs and pull secret from the
// config server, which serves a node only its own pool's: the API server
// serves the daemon's ServiceAccount neither (issue 37, finding 10).
var _ = Describe("A running node's inputs", func() {
	It("are the config server's to serve the daemon, only its own node's, and the API server's to refuse", func(ctx SpecContext) {
		kubeconfig := e2eKubeconfig()
		c := newClient(kubeconfig)
		daemon := daemonPod(ctx)
		token := func(audiences ...string) string {
			GinkgoHelper()
			tok, err := clientset.CoreV1().ServiceAccounts(strataNS).CreateToken(ctx, "strata-daemon", &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{
					Audiences:         audiences,
					BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: daemon.Name, UID: daemon.UID},
					ExpirationSeconds: ptr.To[int64](600),
				},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return tok.Status.Token
		}

		By("another pool's rendered config and a pull secret the real node does not name")
		var rnd [3]byte
		_, _ = rand.Read(rnd[:])
		other := "e2e-inputs-" + hex.EncodeToString(rnd[:])
		mc := &v1alpha1.MachineConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "rendered-" + other + "-1", Labels: map[string]string{v1alpha1.PoolLabel: other}},
			Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.4.0"}}`)}},
		}
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "strata-nodes", Name: other},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
		}
		for _, o := range []client.Object{mc, sec} {
			Expect(c.Create(ctx, o)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(c.Delete(ctx, o))).To(Succeed()) })
		}

		By("the API server refusing the daemon's token both")
		cfg := rest.AnonymousClientConfig(restConfig())
		cfg.BearerToken = token()
		asDaemon, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		err = asDaemon.Get(ctx, client.ObjectKeyFromObject(mc), &v1alpha1.MachineConfig{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the daemon's get of MachineConfig %s: %v, want Forbidden", mc.Name, err)
		err = asDaemon.Get(ctx, client.ObjectKeyFromObject(sec), &corev1.Secret{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the daemon's get of Secret strata-nodes/%s: %v, want Forbidden", sec.Name, err)

		By("the config server, trusted by the CA the controller publishes")
		cm := &corev1.ConfigMap{}
		Eventually(func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: strataNS, Name: bootstrap.CAConfigMap}, cm)
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM([]byte(cm.Data[bootstrap.CAKey]))).To(BeTrue(), "ConfigMap %s holds no CA", bootstrap.CAConfigMap)
		port := portForward(ctx, kubeconfig)
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, MinVersion: tls.VersionTLS12,
			// A name the certificate always carries; the forward is to
			// 127.0.0.1.
			ServerName: bootstrap.ServiceName + "." + strataNS + ".svc",
		}}}
		get := func(path, token string) (int, string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+port+path, nil)
			if err != nil {
				return 0, "", err
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := hc.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), err
		}
		forServer := token(configserver.NodeTokenAudience)
		Eventually(func(g Gomega) {
			code, body, err := get(configserver.NodeMachineConfigPath+mc.Name, forServer)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(http.StatusForbidden), "another pool's config: %s", body)
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		code, body, err := get(configserver.NodePullSecretPath+sec.Name, forServer)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden), "a pull secret the node does not name: %s", body)
		code, _, err = get(configserver.NodeMachineConfigPath+mc.Name, token())
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusUnauthorized), "a token for the API server")

		By("the config server serving what the controller named on the real node")
		n, err := clientset.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		if own := n.Annotations[v1alpha1.DesiredConfigAnnotation]; own != "" {
			code, body, err := get(configserver.NodeMachineConfigPath+own, forServer)
			Expect(err).NotTo(HaveOccurred())
			Expect(code).To(Equal(http.StatusOK), "its own desired config %s: %s", own, body)
			Expect(body).To(ContainSubstring(`"name":"` + own + `"`))
		} else {
			GinkgoWriter.Printf("node %s has no desired config: only the refusals checked\n", nodeName)
		}
	})
})
