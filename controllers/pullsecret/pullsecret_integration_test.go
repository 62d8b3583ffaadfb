package pullsecret

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

const (
	buildNS = "strata-system"
	nodeNS  = DefaultNodeNamespace
	timeout = 30 * time.Second
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
		ctx := context.Background()
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: buildNS}}); err != nil {
			return err
		}
		// The controller's ServiceAccount and RBAC, and the nodes'
		// namespace, as config/ installs them.
		return env.Install(ctx, "config/nodes", "config/rbac", "config/policy")
	})
}

// startController runs the reconciler as the controller's ServiceAccount,
// with the rights config/rbac gives it.
func startController(t *testing.T) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + buildNS + ":strata-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + buildNS, "system:authenticated"},
	}
	secrets := cache.ByObject{Namespaces: map[string]cache.Config{buildNS: {}, nodeNS: {}}}
	saEnv := *env
	saEnv.Config = cfg
	saEnv.StartManager(t, ctrl.Options{Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: secrets}}}, func(mgr ctrl.Manager) error {
		return (&Reconciler{
			Client:          mgr.GetClient(),
			Recorder:        mgr.GetEventRecorder("strata-pullsecret"),
			SourceNamespace: buildNS,
			NodeNamespace:   nodeNS,
		}).SetupWithManager(mgr)
	})
}

func dockerConfig(user string) []byte {
	return []byte(fmt.Sprintf(`{"auths":{"registry.example.com":{"username":%q,"password":"x"}}}`, user))
}

func source(t *testing.T, name, user string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: buildNS, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(user), "extra": []byte("not for nodes")},
	}
	must(t, env.Client.Create(context.Background(), s))
	return s
}

func config(t *testing.T, name, push, pull string) *v1alpha1.MachineOSConfig {
	t.Helper()
	m := &v1alpha1.MachineOSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: name},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: push},
			RenderedImagePushSpec:   "registry.example.com/strata/" + name + ":latest",
		},
	}
	if pull != "" {
		m.Spec.RenderedImagePullSecret = &v1alpha1.SecretReference{Name: pull}
	}
	must(t, env.Client.Create(context.Background(), m))
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// copyOf waits until the copy of name holds user's credentials and only
// them.
func copyOf(t *testing.T, name, user string) {
	t.Helper()
	testenv.Eventually(t, timeout, "copy of "+name+" for "+user, func() error {
		c := &corev1.Secret{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: nodeNS, Name: name}, c); err != nil {
			return err
		}
		if string(c.Data[corev1.DockerConfigJsonKey]) != string(dockerConfig(user)) || len(c.Data) != 1 || c.Type != corev1.SecretTypeDockerConfigJson {
			return fmt.Errorf("copy holds %q (%d keys, type %s)", c.Data[corev1.DockerConfigJsonKey], len(c.Data), c.Type)
		}
		if c.Labels[CopyLabel] != "true" {
			return fmt.Errorf("copy labels %v", c.Labels)
		}
		return nil
	})
}

func noCopyOf(t *testing.T, name string) {
	t.Helper()
	testenv.Eventually(t, timeout, "no copy of "+name, func() error {
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: nodeNS, Name: name}, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return errors.New("the copy exists")
		}
		return err
	})
}

// TestCopiesFollowTheMachineOSConfigs: a pull secret a MachineOSConfig
// names is copied to strata-nodes (its dockerconfigjson only), follows
// its source, is deleted when no MachineOSConfig names it any more, and
// is put back when someone deletes it while it is named.
func TestCopiesFollowTheMachineOSConfigs(t *testing.T) {
	ctx := context.Background()
	startController(t)
	source(t, "follow-push", "pusher")
	src := source(t, "follow-pull", "one")
	source(t, "follow-pull-2", "two")
	a := config(t, "follow-a", "follow-push", "follow-pull")
	b := config(t, "follow-b", "follow-push", "follow-pull")
	copyOf(t, "follow-pull", "one")
	noCopyOf(t, "follow-push")

	src.Data[corev1.DockerConfigJsonKey] = dockerConfig("rotated")
	must(t, env.Client.Update(ctx, src))
	copyOf(t, "follow-pull", "rotated")

	must(t, env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nodeNS, Name: "follow-pull"}}))
	copyOf(t, "follow-pull", "rotated")

	// One MachineOSConfig moves to another pull secret; the other still
	// names the first.
	a.Spec.RenderedImagePullSecret = &v1alpha1.SecretReference{Name: "follow-pull-2"}
	must(t, env.Client.Update(ctx, a))
	copyOf(t, "follow-pull-2", "two")
	copyOf(t, "follow-pull", "rotated")

	must(t, env.Client.Delete(ctx, b))
	noCopyOf(t, "follow-pull")
	a.Spec.RenderedImagePullSecret = nil
	must(t, env.Client.Update(ctx, a))
	noCopyOf(t, "follow-pull-2")
}

// TestPushSecretNeverCopied: a Secret some MachineOSConfig pushes with is
// not given to the nodes even when another names it as its pull secret,
// and that one is told why; a copy made before is deleted.
func TestPushSecretNeverCopied(t *testing.T) {
	ctx := context.Background()
	startController(t)
	source(t, "shared-creds", "pusher")
	source(t, "own-push", "pusher")
	puller := config(t, "shared-pull", "own-push", "shared-creds")
	copyOf(t, "shared-creds", "pusher")
	config(t, "shared-push", "shared-creds", "")
	noCopyOf(t, "shared-creds")
	testenv.Eventually(t, timeout, "a Warning on "+puller.Name, func() error {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == puller.Name && e.Reason == "PullSecretNotCopied" && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return errors.New("no PullSecretNotCopied event")
	})
}

// TestForeignSecretLeftAlone: a Secret in strata-nodes that Strata did
// not make is neither overwritten nor deleted.
func TestForeignSecretLeftAlone(t *testing.T) {
	ctx := context.Background()
	startController(t)
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: nodeNS, Name: "foreign"},
		Data:       map[string][]byte{"k": []byte("v")},
	}
	must(t, env.Client.Create(ctx, foreign))
	source(t, "foreign", "someone")
	source(t, "foreign-push", "pusher")
	m := config(t, "foreign", "foreign-push", "foreign")
	must(t, env.Client.Delete(ctx, m))
	// The copy of another name, made after, shows the controller has
	// handled the events before it.
	source(t, "foreign-after", "after")
	config(t, "foreign-after", "foreign-push", "foreign-after")
	copyOf(t, "foreign-after", "after")
	got := &corev1.Secret{}
	must(t, env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), got))
	if string(got.Data["k"]) != "v" || len(got.Data) != 1 {
		t.Errorf("the foreign Secret changed: %v", got.Data)
	}
}

// TestPolicyRefusesPushSecretAsPullSecret: the API server refuses a
// MachineOSConfig that names one Secret for push and node pull, naming
// both fields (config/policy/machineosconfig_policy.yaml).
func TestPolicyRefusesPushSecretAsPullSecret(t *testing.T) {
	ctx := context.Background()
	m := &v1alpha1.MachineOSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "same-secret"},
		Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: "same-secret"},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: "registry-credentials"},
			RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "registry-credentials"},
			RenderedImagePushSpec:   "registry.example.com/strata/same:latest",
		},
	}
	// The API server loads policies in the background.
	testenv.Eventually(t, timeout, "the refusal", func() error {
		err := env.Client.Create(ctx, m.DeepCopy())
		if err == nil {
			must(t, env.Client.Delete(ctx, m.DeepCopy()))
			return errors.New("created")
		}
		for _, want := range []string{"strata-machineosconfig-secrets", "spec.renderedImagePullSecret and spec.renderedImagePushSecret both name Secret registry-credentials", "push credentials"} {
			if !strings.Contains(err.Error(), want) {
				return fmt.Errorf("refusal %q does not say %q", err.Error(), want)
			}
		}
		return nil
	})
	m.Spec.RenderedImagePullSecret.Name = "registry-pull"
	must(t, env.Client.Create(ctx, m))
	m.Spec.RenderedImagePullSecret.Name = "registry-credentials"
	if err := env.Client.Update(ctx, m); err == nil || !strings.Contains(err.Error(), "push credentials") {
		t.Errorf("update to the push secret as pull secret: %v, want the refusal", err)
	}
}

// TestPolicyLetsAnOldSameSecretConfigGo: a MachineOSConfig that named one
// Secret twice before the policy existed can still lose its finalizer and
// be deleted; only its spec is held to the rule.
func TestPolicyLetsAnOldSameSecretConfigGo(t *testing.T) {
	ctx := context.Background()
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	must(t, env.Client.Get(ctx, client.ObjectKey{Name: "strata-machineosconfig-secrets"}, binding))
	restore := binding.DeepCopy()
	restore.ResourceVersion = ""
	bound := func() error {
		err := env.Client.Create(ctx, restore.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	t.Cleanup(func() { _ = bound() })

	old := &v1alpha1.MachineOSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "old-same-secret", Finalizers: []string{"strata.test/keep"}},
		Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: "old-same-secret"},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: "registry-credentials"},
			RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "registry-credentials"},
			RenderedImagePushSpec:   "registry.example.com/strata/old:latest",
		},
	}
	// Made as it was before the policy: without the binding.
	must(t, env.Client.Delete(ctx, binding))
	testenv.Eventually(t, timeout, "the MachineOSConfig made without the policy", func() error {
		return env.Client.Create(ctx, old.DeepCopy())
	})
	must(t, bound())
	probe := old.DeepCopy()
	probe.Name, probe.Finalizers = "probe-same-secret", nil
	testenv.Eventually(t, timeout, "the policy enforced again", func() error {
		if err := env.Client.Create(ctx, probe.DeepCopy()); err == nil {
			must(t, env.Client.Delete(ctx, probe.DeepCopy()))
			return errors.New("created")
		}
		return nil
	})

	got := &v1alpha1.MachineOSConfig{}
	must(t, env.Client.Get(ctx, client.ObjectKeyFromObject(old), got))
	got.Spec.RenderedImagePushSpec = "registry.example.com/strata/other:latest"
	if err := env.Client.Update(ctx, got.DeepCopy()); err == nil || !strings.Contains(err.Error(), "push credentials") {
		t.Errorf("a spec change of the old MachineOSConfig: %v, want the refusal", err)
	}
	must(t, env.Client.Get(ctx, client.ObjectKeyFromObject(old), got))
	got.Finalizers = nil
	if err := env.Client.Update(ctx, got); err != nil {
		t.Fatalf("removing the old MachineOSConfig's finalizer: %v", err)
	}
	must(t, client.IgnoreNotFound(env.Client.Delete(ctx, got)))
}
