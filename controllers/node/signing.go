package node

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/layering"
)

// signatureGate holds a signed pool's image until the build controller
// has signed it (ImageSigned=True): the nodes would refuse it unsigned.
// It also sets the policy the daemons write before they switch.
func signatureGate(t *target, mosc *v1alpha1.MachineOSConfig, b *v1alpha1.MachineOSBuild) error {
	if mosc.Spec.Signing == nil {
		return nil
	}
	policy, err := layering.SignaturePolicy(mosc)
	if err != nil {
		return err
	}
	t.signaturePolicy = policy
	if t.Image == "" || b == nil || meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildImageSigned) {
		return nil
	}
	msg := fmt.Sprintf("The image of build %s (%s) waits for its signature (spec.signing of MachineOSConfig %s): nodes refuse unsigned images", b.Name, b.Status.DigestedImagePushSpec, mosc.Name)
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildImageSigned); c != nil {
		msg += fmt.Sprintf("; %s: %s", c.Reason, c.Message)
	}
	t.waitReason, t.Waiting, t.Image = v1alpha1.ReasonAwaitingImageSignature, msg, ""
	return nil
}
