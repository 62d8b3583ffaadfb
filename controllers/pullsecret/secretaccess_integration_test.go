package pullsecret

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// TestPolicyRefusesSecretsTheAuthorCannotRead: a user who may write
// MachineOSConfigs but not read a Secret cannot name it, in any of the
// four fields that name Secrets; one they may read is accepted; an update
// that keeps the names passes, so the controller's own writes do
// (config/policy/machineosconfig_policy.yaml,
// strata-machineosconfig-secret-access).
func TestPolicyRefusesSecretsTheAuthorCannotRead(t *testing.T) {
	ctx := context.Background()
	const user = "pool-admin"
	// The user may write MachineOSConfigs, and get two Secrets only.
	must(t, env.Client.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-mosc-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"machineosconfigs"},
			Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}},
	}))
	must(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-mosc-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-mosc-writer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}))
	must(t, env.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: buildNS, Name: "test-own-secrets"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"},
			ResourceNames: []string{"own-push", "own-pull"}, Verbs: []string{"get"}}},
	}))
	must(t, env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: buildNS, Name: "test-own-secrets"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "test-own-secrets"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}))
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	must(t, err)

	spec := func(mutate func(*v1alpha1.MachineOSConfigSpec)) *v1alpha1.MachineOSConfig {
		m := &v1alpha1.MachineOSConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "secret-access"},
			Spec: v1alpha1.MachineOSConfigSpec{
				MachineConfigPool:       v1alpha1.LocalObjectReference{Name: "secret-access"},
				ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
				RenderedImagePushSecret: v1alpha1.SecretReference{Name: "own-push"},
				RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "own-pull"},
				RenderedImagePushSpec:   "registry.example.com/strata/secret-access:latest",
			},
		}
		if mutate != nil {
			mutate(&m.Spec)
		}
		return m
	}
	for _, tc := range []struct {
		field  string
		mutate func(*v1alpha1.MachineOSConfigSpec)
	}{
		{"spec.renderedImagePushSecret", func(s *v1alpha1.MachineOSConfigSpec) { s.RenderedImagePushSecret.Name = "other-pool-push" }},
		{"spec.renderedImagePullSecret", func(s *v1alpha1.MachineOSConfigSpec) { s.RenderedImagePullSecret.Name = "org-wide-credential" }},
		{"spec.baseImagePullSecret", func(s *v1alpha1.MachineOSConfigSpec) {
			s.BaseImagePullSecret = &v1alpha1.SecretReference{Name: "other-base-pull"}
		}},
		{"spec.signing.keySecret", func(s *v1alpha1.MachineOSConfigSpec) {
			s.Signing = &v1alpha1.ImageSigning{KeySecret: v1alpha1.LocalObjectReference{Name: "other-pool-signing-key"},
				PublicKeys: []v1alpha1.PEMPublicKey{publicKeyPEM(t)}}
		}},
	} {
		// The API server loads policies in the background.
		testenv.Eventually(t, timeout, "the refusal of "+tc.field, func() error {
			err := as.Create(ctx, spec(tc.mutate))
			if err == nil {
				must(t, env.Client.Delete(ctx, spec(nil)))
				return errors.New("created")
			}
			for _, want := range []string{"strata-machineosconfig-secret-access", user + " may not read the Secret it names in " + tc.field} {
				if !strings.Contains(err.Error(), want) {
					return fmt.Errorf("refusal %q does not say %q", err.Error(), want)
				}
			}
			return nil
		})
	}
	// Secrets the author may read are accepted.
	m := spec(nil)
	must(t, as.Create(ctx, m))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, spec(nil)) })
	// An update that keeps the names passes (the controller's finalizer,
	// an edit of another field), one that names another unreadable
	// Secret does not.
	m.Spec.RenderedImagePushSpec = "registry.example.com/strata/secret-access:v2"
	must(t, as.Update(ctx, m))
	m.Spec.RenderedImagePullSecret.Name = "org-wide-credential"
	if err := as.Update(ctx, m); err == nil || !strings.Contains(err.Error(), "spec.renderedImagePullSecret (org-wide-credential in strata-system)") {
		t.Errorf("update naming an unreadable Secret: %v, want the refusal naming the field and the Secret", err)
	}
}

// publicKeyPEM is a new ECDSA public key in PEM form.
func publicKeyPEM(t *testing.T) v1alpha1.PEMPublicKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	must(t, err)
	return v1alpha1.PEMPublicKey(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}
