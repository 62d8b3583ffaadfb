package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		for _, ns := range []string{"strata-system", "strata-config-server"} {
			if err := e.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return err
			}
		}
		return nil
	})
}

const wait = 20 * time.Second

func token(ctx context.Context, pool string) (*corev1.Secret, error) {
	var s corev1.Secret
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: "strata-config-server", Name: v1alpha1.BootstrapTokenSecretName(pool)}, &s)
	return &s, err
}

// TestTokens (issue 25 point 2): every pool gets a token Secret, owned
// by it; annotating or deleting it rotates the token.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	stop := env.StartManager(t, ctrl.Options{}, func(mgr ctrl.Manager) error {
		return (&TokenReconciler{Client: mgr.GetClient(), Namespace: "strata-config-server"}).SetupWithManager(mgr)
	})
	defer stop()
	pool := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "tokens"}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var first *corev1.Secret
	testenv.Eventually(t, wait, "the pool's token Secret", func() error {
		s, err := token(ctx, "tokens")
		if err != nil {
			return err
		}
		if s.Labels[v1alpha1.BootstrapTokenLabel] != "tokens" || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != pool.UID {
			return fmt.Errorf("labels %v owners %v", s.Labels, s.OwnerReferences)
		}
		if n := len(s.Data[v1alpha1.BootstrapTokenKey]); n != 43 {
			return fmt.Errorf("token of %d characters, want 43 (256 bits, base64url)", n)
		}
		first = s
		return nil
	})

	first.Annotations = map[string]string{v1alpha1.RotateTokenAnnotation: "1"}
	if err := env.Client.Update(ctx, first); err != nil {
		t.Fatal(err)
	}
	var second *corev1.Secret
	testenv.Eventually(t, wait, "a new token after the rotate annotation", func() error {
		s, err := token(ctx, "tokens")
		if err != nil {
			return err
		}
		if s.UID == first.UID || string(s.Data[v1alpha1.BootstrapTokenKey]) == string(first.Data[v1alpha1.BootstrapTokenKey]) {
			return errors.New("still the first token")
		}
		if _, ok := s.Annotations[v1alpha1.RotateTokenAnnotation]; ok {
			return errors.New("the new Secret carries the rotate annotation")
		}
		second = s
		return nil
	})

	if err := env.Client.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "a new token after deleting it", func() error {
		s, err := token(ctx, "tokens")
		if err != nil {
			return err
		}
		if s.UID == second.UID || string(s.Data[v1alpha1.BootstrapTokenKey]) == string(second.Data[v1alpha1.BootstrapTokenKey]) {
			return errors.New("still the second token")
		}
		return nil
	})
}

// secret gets the CA (strata-system) or the serving certificate
// (strata-config-server, the only Secrets the config server reads).
func secret(ctx context.Context, name string) (*corev1.Secret, error) {
	ns := "strata-config-server"
	if name == v1alpha1.ConfigServerCASecret {
		ns = "strata-system"
	}
	var s corev1.Secret
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)
	return &s, err
}

// TestServingCertificate (issue 25 point 1): the CA is made once; the
// serving certificate carries the Service's names and is issued again,
// by the same CA, when it is deleted or renewal is due.
func TestServingCertificate(t *testing.T) {
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: ServiceName,
			Annotations: map[string]string{ServerNamesAnnotation: "config.example.com, 10.9.8.7"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 22623}}},
	}
	if err := env.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	clock := func() time.Time { return now }
	var r *CertReconciler
	stop := env.StartManager(t, ctrl.Options{}, func(mgr ctrl.Manager) error {
		r = &CertReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: "strata-system", SecretNamespace: "strata-config-server", Now: clock}
		return r.SetupWithManager(mgr)
	})
	names := []string{"strata-config-server.strata-system.svc", "strata-config-server.strata-system.svc.cluster.local",
		svc.Spec.ClusterIP, "10.9.8.7", "config.example.com"}
	var ca, tls1 *corev1.Secret
	testenv.Eventually(t, wait, "the CA and the serving certificate", func() error {
		var err error
		if ca, err = secret(ctx, v1alpha1.ConfigServerCASecret); err != nil {
			return err
		}
		if tls1, err = secret(ctx, v1alpha1.ConfigServerTLSSecret); err != nil {
			return err
		}
		kp := keyPair{cert: tls1.Data[corev1.TLSCertKey], key: tls1.Data[corev1.TLSPrivateKeyKey]}
		if _, why := servingFresh(kp, keyPair{cert: ca.Data[CAKey], key: ca.Data[CAKeyKey]}, names, now); why != "" {
			return errors.New(why)
		}
		if string(tls1.Data[CAKey]) != string(ca.Data[CAKey]) || tls1.Type != corev1.SecretTypeTLS {
			return errors.New("the TLS Secret does not carry the CA, or is not kubernetes.io/tls")
		}
		return nil
	})

	if err := env.Client.Delete(ctx, tls1); err != nil {
		t.Fatal(err)
	}
	var tls2 *corev1.Secret
	testenv.Eventually(t, wait, "the serving certificate issued again by the same CA", func() error {
		var err error
		if tls2, err = secret(ctx, v1alpha1.ConfigServerTLSSecret); err != nil {
			return err
		}
		if tls2.UID == tls1.UID {
			return errors.New("the deleted one")
		}
		c, err := secret(ctx, v1alpha1.ConfigServerCASecret)
		if err != nil {
			return err
		}
		if c.UID != ca.UID {
			return errors.New("the CA changed")
		}
		return nil
	})
	stop()

	// Eight months on, the certificate is due: a restarted controller
	// (the same as its own requeue) replaces it, the CA stays.
	now = now.Add(245 * 24 * time.Hour)
	env.StartManager(t, ctrl.Options{}, func(mgr ctrl.Manager) error {
		r = &CertReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: "strata-system", SecretNamespace: "strata-config-server", Now: clock}
		return r.SetupWithManager(mgr)
	})
	testenv.Eventually(t, wait, "the renewed serving certificate", func() error {
		s, err := secret(ctx, v1alpha1.ConfigServerTLSSecret)
		if apierrors.IsNotFound(err) {
			return err
		}
		if err != nil {
			return err
		}
		if s.UID == tls2.UID {
			return errors.New("not renewed")
		}
		kp := keyPair{cert: s.Data[corev1.TLSCertKey], key: s.Data[corev1.TLSPrivateKeyKey]}
		if _, why := servingFresh(kp, keyPair{cert: ca.Data[CAKey], key: ca.Data[CAKeyKey]}, names, now); why != "" {
			return errors.New(why)
		}
		return nil
	})
}
