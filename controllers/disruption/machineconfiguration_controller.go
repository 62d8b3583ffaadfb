package disruption

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	policy "github.com/strata-dev/strata/disruption"
	"github.com/strata-dev/strata/internal/status"
)

// Reconciler writes the MachineConfiguration's merged policy.
type Reconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigurations/status,verbs=get;update;patch

// SetupWithManager registers the reconciler. Its own status writes come
// back as events, and find the status as computed: no write follows.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("disruption-policy").
		For(&v1alpha1.MachineConfiguration{}).
		Complete(r)
}

// Reconcile writes the merge of the defaults and the spec's policy into
// status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc := &v1alpha1.MachineConfiguration{}
	if err := r.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The schema admits only the name cluster; anything else is not the
	// cluster's policy and is left alone.
	if mc.Name != v1alpha1.MachineConfigurationName || !mc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	next := mc.DeepCopy()
	computeStatus(next)
	if err := status.Patch(ctx, r.Client, mc, next); err != nil {
		return status.QuietConflict(ctx, ctrl.Result{}, fmt.Errorf("write the status of MachineConfiguration %s: %w", mc.Name, err))
	}
	return ctrl.Result{}, nil
}

// computeStatus sets all of mc's status from its spec.
func computeStatus(mc *v1alpha1.MachineConfiguration) {
	defaults := policy.Defaults()
	merged := policy.Merge(defaults, mc.Spec.NodeDisruptionPolicy)
	mc.Status.NodeDisruptionPolicyStatus.ClusterPolicies = merged
	mc.Status.ObservedGeneration = mc.Generation
	meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{
		Type:               v1alpha1.MachineConfigurationPolicyMerged,
		Status:             metav1.ConditionTrue,
		Reason:             v1alpha1.ReasonPolicyMerged,
		ObservedGeneration: mc.Generation,
		Message: status.Message(fmt.Sprintf("%d file and %d unit policies in effect: Strata's %d defaults merged with the spec's %d; a change no policy names takes a soft reboot where bootc can do one, else a full reboot",
			len(merged.Files), len(merged.Units), len(defaults.Files)+len(defaults.Units),
			len(mc.Spec.NodeDisruptionPolicy.Files)+len(mc.Spec.NodeDisruptionPolicy.Units))),
	})
}
