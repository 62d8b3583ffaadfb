package disruption

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/strata-dev/strata/api/v1alpha1"
	policy "github.com/strata-dev/strata/disruption"
	"github.com/strata-dev/strata/test/testenv"
)

const (
	ns      = "strata-system"
	timeout = 30 * time.Second
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
		if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		// The controller's ServiceAccount and RBAC as config/ installs
		// them: the test fails if the role lacks a right it uses.
		return env.Install(context.Background(), "config/nodes", "config/rbac")
	})
}

// startController runs the reconciler as the controller's ServiceAccount.
func startController(t *testing.T) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":strata-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	saEnv := *env
	saEnv.Config = cfg
	saEnv.StartManager(t, ctrl.Options{}, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
}

func get(t *testing.T) (*v1alpha1.MachineConfiguration, error) {
	t.Helper()
	mc := &v1alpha1.MachineConfiguration{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Name: v1alpha1.MachineConfigurationName}, mc)
	return mc, err
}

// waitMerged waits until the status is the merge of the defaults and
// user, for the object's generation, and returns the object.
func waitMerged(t *testing.T, user v1alpha1.NodeDisruptionPolicyConfig) *v1alpha1.MachineConfiguration {
	t.Helper()
	want := policy.Merge(policy.Defaults(), user)
	var mc *v1alpha1.MachineConfiguration
	testenv.Eventually(t, timeout, "the merged policy in status", func() error {
		var err error
		if mc, err = get(t); err != nil {
			return err
		}
		if mc.Status.ObservedGeneration != mc.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", mc.Status.ObservedGeneration, mc.Generation)
		}
		c := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MachineConfigurationPolicyMerged)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != mc.Generation || c.Message == "" {
			return fmt.Errorf("condition %+v", c)
		}
		if got := mc.Status.NodeDisruptionPolicyStatus.ClusterPolicies; !reflect.DeepEqual(got, want) {
			return fmt.Errorf("clusterPolicies %+v, want %+v", got, want)
		}
		return nil
	})
	return mc
}

// reconciles counts this controller's finished reconciles in the process.
func reconciles(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, fam := range families {
		if fam.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "disruption-policy" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

func restartAction(s string) v1alpha1.NodeDisruptionPolicyAction {
	return v1alpha1.NodeDisruptionPolicyAction{Type: v1alpha1.RestartAction, Restart: &v1alpha1.NodeDisruptionPolicyService{ServiceName: v1alpha1.NodeDisruptionPolicyServiceName(s)}}
}

// The status is the defaults merged with the spec, for the current
// generation; the controller creates nothing: deleted, the object stays
// deleted after the controller has seen the deletion.
func TestStatusIsTheMergedPolicy(t *testing.T) {
	startController(t)
	ctx := context.Background()

	// Without a spec: the defaults.
	mc := &v1alpha1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.MachineConfigurationName}}
	if err := env.Client.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	waitMerged(t, v1alpha1.NodeDisruptionPolicyConfig{})

	// A policy replacing a default and adding others: the new
	// generation's merge.
	mc, err := get(t)
	if err != nil {
		t.Fatal(err)
	}
	user := v1alpha1.NodeDisruptionPolicyConfig{
		Files: []v1alpha1.NodeDisruptionPolicyFile{
			{Path: "/etc/chrony.conf", Actions: []v1alpha1.NodeDisruptionPolicyAction{restartAction("chronyd.service")}},
			{Path: "/etc/containers/policy.json", Actions: []v1alpha1.NodeDisruptionPolicyAction{{Type: v1alpha1.ReloadAction, Reload: &v1alpha1.NodeDisruptionPolicyService{ServiceName: "crio.service"}}}},
		},
		Units:  []v1alpha1.NodeDisruptionPolicyUnit{{Name: "chronyd.service", Actions: []v1alpha1.NodeDisruptionPolicyAction{{Type: v1alpha1.SoftRebootAction}}}},
		SSHKey: v1alpha1.NodeDisruptionPolicySSHKey{Actions: []v1alpha1.NodeDisruptionPolicyAction{{Type: v1alpha1.DrainAction}}},
	}
	mc.Spec.NodeDisruptionPolicy = user
	if err := env.Client.Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	got := waitMerged(t, user)
	if got.Generation < 2 {
		t.Errorf("generation %d after a spec change", got.Generation)
	}
	if p := got.Status.NodeDisruptionPolicyStatus.ClusterPolicies.Files; len(p) != len(policy.Defaults().Files)+1 {
		t.Errorf("%d file policies, want the defaults, one replaced, and one more: %+v", len(p), p)
	}

	// Deleted: the controller sees it and makes nothing in its place;
	// nor could it, as its role cannot create one.
	before := reconciles(t)
	if err := env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, "a reconcile of the deletion", func() error {
		if _, err := get(t); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (get: %w)", err)
		}
		if reconciles(t) <= before {
			return errors.New("no reconcile yet")
		}
		return nil
	})
	list := &v1alpha1.MachineConfigurationList{}
	if err := env.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d MachineConfigurations after the deletion, want none", len(list.Items))
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":strata-controller",
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Group: v1alpha1.GroupVersion.Group, Resource: "machineconfigurations"},
	}}
	if err := env.Client.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	if review.Status.Allowed {
		t.Error("the controller's role may create MachineConfigurations")
	}
}
