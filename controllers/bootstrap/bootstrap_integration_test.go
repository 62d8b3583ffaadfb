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

// TestTokens (issue 25 point 2, issue 37 finding 9): a pool that takes
// new nodes gets a token Secret, owned by it; annotating or deleting it
// rotates the token; a pool that stops taking new nodes loses it.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	stop := env.StartManager(t, ctrl.Options{}, func(mgr ctrl.Manager) error {
		return (&TokenReconciler{Client: mgr.GetClient(), Namespace: "strata-config-server"}).SetupWithManager(mgr)
	})
	defer stop()
	pool := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "tokens"},
		Spec: v1alpha1.MachineConfigPoolSpec{BootstrapToken: &v1alpha1.BootstrapToken{}}}
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
		if _, ok := s.Data[v1alpha1.PreviousBootstrapTokenKey]; ok {
			return errors.New("a first token with a previous one")
		}
		first = s
		return nil
	})

	first.Annotations = map[string]string{v1alpha1.RotateTokenAnnotation: "1"}
	if err := env.Client.Update(ctx, first); err != nil {
		t.Fatal(err)
	}
	var second *corev1.Secret
	testenv.Eventually(t, wait, "a new token after the rotate annotation, the first one working on for the default overlap", func() error {
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
		if got := string(s.Data[v1alpha1.PreviousBootstrapTokenKey]); got != string(first.Data[v1alpha1.BootstrapTokenKey]) {
			return fmt.Errorf("previous token %q, want the first one", got)
		}
		exp, err := time.Parse(time.RFC3339, s.Annotations[v1alpha1.PreviousTokenExpiresAnnotation])
		if err != nil {
			return err
		}
		if d := exp.Sub(s.CreationTimestamp.Time); d < 59*time.Minute || d > 61*time.Minute {
			return fmt.Errorf("the previous token expires %v after the rotation, want 1h", d)
		}
		second = s
		return nil
	})

	if err := env.Client.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	var third *corev1.Secret
	testenv.Eventually(t, wait, "a new token after deleting it, with no previous one", func() error {
		s, err := token(ctx, "tokens")
		if err != nil {
			return err
		}
		if s.UID == second.UID || string(s.Data[v1alpha1.BootstrapTokenKey]) == string(second.Data[v1alpha1.BootstrapTokenKey]) {
			return errors.New("still the second token")
		}
		if _, ok := s.Data[v1alpha1.PreviousBootstrapTokenKey]; ok {
			return errors.New("a deleted token lives on as the previous one")
		}
		third = s
		return nil
	})

	pool.Spec.BootstrapToken = nil
	if err := env.Client.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the token deleted once the pool takes no new nodes", func() error {
		s, err := token(ctx, "tokens")
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("token Secret %s still there (uid %s, the third %s)", s.Name, s.UID, third.UID)
	})
}

// TestTokensOptIn (issue 37 finding 9): a pool without
// spec.bootstrapToken gets no token, and one left from before goes; a
// Secret of the token's name that the controller did not make stays.
func TestTokensOptIn(t *testing.T) {
	ctx := context.Background()
	r := &TokenReconciler{Client: env.Client, Namespace: "strata-config-server"}
	for _, name := range []string{"no-joins", "left-over", "users-secret"} {
		if err := env.Client.Create(ctx, &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	for name, labels := range map[string]map[string]string{"left-over": {v1alpha1.BootstrapTokenLabel: "left-over"}, "users-secret": nil} {
		if err := env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "strata-config-server", Name: v1alpha1.BootstrapTokenSecretName(name), Labels: labels},
			Data:       map[string][]byte{v1alpha1.BootstrapTokenKey: []byte("from-before")},
		}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]bool{"no-joins": false, "left-over": false, "users-secret": true} {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatalf("reconcile pool %s: %v", name, err)
		}
		_, err := token(ctx, name)
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		if got := err == nil; got != want {
			t.Errorf("pool %s without spec.bootstrapToken: a Secret %s is there: %v, want %v", name, v1alpha1.BootstrapTokenSecretName(name), got, want)
		}
	}
}

// TestTokenRotationPeriod (issue 37 finding 9): a token is replaced once
// rotationPeriod old; the replaced one works on for the overlap, but
// never past rotationPeriod + rotationOverlap from its own making.
func TestTokenRotationPeriod(t *testing.T) {
	ctx := context.Background()
	var now time.Time
	r := &TokenReconciler{Client: env.Client, Namespace: "strata-config-server", Now: func() time.Time { return now }}
	pool := &v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "rotating"}, Spec: v1alpha1.MachineConfigPoolSpec{
		BootstrapToken: &v1alpha1.BootstrapToken{RotationPeriod: &metav1.Duration{Duration: time.Hour}, RotationOverlap: &metav1.Duration{Duration: 10 * time.Minute}}}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: pool.Name}}
	now = time.Now()
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter < time.Hour || res.RequeueAfter > time.Hour+2*time.Second {
		t.Errorf("after making the token: requeue after %v, want when it is due (1h)", res.RequeueAfter)
	}
	first, err := token(ctx, pool.Name)
	if err != nil {
		t.Fatal(err)
	}
	made := first.CreationTimestamp.Time

	now = made.Add(59 * time.Minute)
	if res, err = r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if s, err := token(ctx, pool.Name); err != nil || s.UID != first.UID {
		t.Fatalf("a token 59m old with a rotationPeriod of 1h: replaced (%v)", err)
	}
	if res.RequeueAfter < time.Minute || res.RequeueAfter > time.Minute+2*time.Second {
		t.Errorf("a minute before the rotation: requeue after %v, want 1m", res.RequeueAfter)
	}

	// A controller late by a minute: the overlap would end at 71m, past
	// the first token's own expiry (1h + 10m).
	now = made.Add(61 * time.Minute)
	if _, err = r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	second, err := token(ctx, pool.Name)
	if err != nil {
		t.Fatal(err)
	}
	if second.UID == first.UID || string(second.Data[v1alpha1.PreviousBootstrapTokenKey]) != string(first.Data[v1alpha1.BootstrapTokenKey]) {
		t.Fatalf("at 61m: not rotated with the first token as the previous one")
	}
	if got, want := second.Annotations[v1alpha1.PreviousTokenExpiresAnnotation], made.Add(70*time.Minute).UTC().Format(time.RFC3339); got != want {
		t.Errorf("the previous token expires at %s, want %s (made + rotationPeriod + rotationOverlap)", got, want)
	}
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
		// The daemons trust the server by the published certificate.
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "strata-system", Name: CAConfigMap}, &cm); err != nil {
			return err
		}
		if len(cm.Data) != 1 || cm.Data[CAKey] != string(ca.Data[CAKey]) || len(cm.BinaryData) > 0 {
			return errors.New("ConfigMap " + CAConfigMap + " does not hold exactly the CA's certificate")
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
