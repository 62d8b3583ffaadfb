package node

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node/plan"
	"github.com/strata-dev/strata/internal/imageref"
	"github.com/strata-dev/strata/internal/layering"
	"github.com/strata-dev/strata/nodeconfig"
)

// target is a pool's target and what the daemons need besides it.
type target struct {
	plan.Target
	// pullSecret is the Secret the daemons write to /run/ostree/auth.json
	// (the MachineOSConfig's renderedImagePullSecret); "" for none.
	pullSecret string
	// ignored lists content of the rendered config that only an image
	// carries, in a pool that builds none: reported, not applied.
	ignored []string
	// waitReason is the reason of the pool's Updated condition while
	// Waiting ("" for ReasonWaitingForImage).
	waitReason string
	// signaturePolicy is the imageSignaturePolicy annotation's value (a
	// NodeSignaturePolicy's JSON); "" when the pool's images are not
	// signed.
	signaturePolicy string
}

// targetFor works out what the pool's nodes should run:
//
//   - a layered pool (layering.Holder: the MachineOSConfig whose claim
//     the build controller recorded on the pool): its current image, but only once the
//     build of the pool's current rendered config has succeeded, so that
//     nodes never get an image of another configuration;
//   - otherwise the rendered config's osImageURL, which must be pinned by
//     digest (nodes pull by digest only);
//   - otherwise each node's original image (Target.Image ""), so deleting
//     a MachineOSConfig rolls its pool back.
func (r *Reconciler) targetFor(ctx context.Context, pool *v1alpha1.MachineConfigPool) (target, error) {
	var t target
	t.Config = pool.Status.Configuration.Name
	if t.Config == "" {
		t.Waiting = "The pool has no rendered configuration yet"
		return t, nil
	}
	mosc, err := layering.Holder(ctx, r.Client, pool)
	if err != nil {
		return t, err
	}
	if mosc != nil {
		if mosc.Spec.RenderedImagePullSecret != nil {
			t.pullSecret = mosc.Spec.RenderedImagePullSecret.Name
		}
		var b *v1alpha1.MachineOSBuild
		b, t.Image, t.Waiting, err = r.builtImage(ctx, mosc, t.Config)
		if err == nil && t.Image != "" && mosc.Spec.ImageApproval == v1alpha1.ImageApprovalRequired {
			t.waitReason, t.Waiting = approval(b)
			if t.Waiting != "" {
				t.Image = ""
			}
		}
		if err == nil {
			err = signatureGate(&t, mosc, b)
		}
		return t, err
	}

	rendered := &v1alpha1.MachineConfig{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: t.Config}, rendered); err != nil {
		if apierrors.IsNotFound(err) {
			t.Waiting = "Rendered config " + t.Config + " does not exist (yet)"
			return t, nil
		}
		return t, fmt.Errorf("get rendered config %s: %w", t.Config, err)
	}
	if url := rendered.Spec.OSImageURL; url != "" {
		if !imageref.ValidPinned(url) {
			t.Waiting = fmt.Sprintf("osImageURL %q of %s is not pinned by digest: nodes pull by digest only; write repository@sha256:<digest>", url, t.Config)
			return t, nil
		}
		t.Image = url
	}
	split, err := nodeconfig.SplitForNode(&rendered.Spec)
	if err != nil {
		// The render controller validated it; this cannot happen unless
		// the validator changed under a stored config.
		t.Waiting = fmt.Sprintf("Rendered config %s is not valid: %v", t.Config, err)
		return t, nil
	}
	t.ignored = split.ImageOnly
	return t, nil
}

// builtImage is the layered pool's image for the rendered config, or why
// there is none yet.
func (r *Reconciler) builtImage(ctx context.Context, mosc *v1alpha1.MachineOSConfig, config string) (b *v1alpha1.MachineOSBuild, image, waiting string, err error) {
	if mosc.Status.MachineOSBuild == nil {
		return nil, "", "MachineOSConfig " + mosc.Name + " has no build yet", nil
	}
	b = &v1alpha1.MachineOSBuild{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: mosc.Status.MachineOSBuild.Name}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", "Build " + mosc.Status.MachineOSBuild.Name + " does not exist (yet)", nil
		}
		return nil, "", "", fmt.Errorf("get build %s: %w", mosc.Status.MachineOSBuild.Name, err)
	}
	image, waiting = buildState(b, config)
	return b, image, waiting, nil
}

// approval is why an image that needs approval may not roll out yet
// (reason and message), or "" when its build is approved.
func approval(b *v1alpha1.MachineOSBuild) (reason, waiting string) {
	c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildImageApproved)
	switch {
	case c != nil && c.Status == metav1.ConditionTrue:
		return "", ""
	case c != nil && c.Status == metav1.ConditionFalse:
		return v1alpha1.ReasonImageRejected, fmt.Sprintf("The image of build %s was rejected (%s: %s); it never rolls out, and nodes keep the image they run until a newer build is approved",
			b.Name, c.Reason, c.Message)
	default:
		return v1alpha1.ReasonAwaitingImageApproval, fmt.Sprintf("The image of build %s (%s) waits for approval (imageApproval Required): a scanner, CI or stratactl approve %s sets its ImageApproved condition",
			b.Name, b.Status.DigestedImagePushSpec, b.Name)
	}
}

// buildState is the build's image, or why there is none (yet).
func buildState(b *v1alpha1.MachineOSBuild, config string) (image, waiting string) {
	switch {
	case b.Spec.MachineConfig.Name != config:
		return "", fmt.Sprintf("Waiting for a build of %s (build %s is of %s)", config, b.Name, b.Spec.MachineConfig.Name)
	case meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildSucceeded):
		img := b.Status.DigestedImagePushSpec
		if !imageref.ValidPinned(img) {
			return "", fmt.Sprintf("Build %s succeeded without an image by digest (%q)", b.Name, img)
		}
		return img, ""
	case meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildFailed):
		msg := "Build " + b.Name + " of " + config + " failed; nodes keep the image they run"
		if b.Status.Failure != nil {
			msg += ": " + strings.TrimSpace(b.Status.Failure.Message)
		}
		return "", msg
	default:
		return "", "Build " + b.Name + " of " + config + " is not done yet"
	}
}
