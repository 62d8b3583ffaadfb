package build

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/attest"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/internal/buildinputs"
	"github.com/strata-dev/strata/internal/history"
	"github.com/strata-dev/strata/internal/registry"
)

// collectGarbage deletes finished builds beyond the history, newest kept,
// with their images (and the images' referrers) and admin stages unless a
// remaining build has them too; never the current build, nor one whose
// image the MachineOSConfig or any node names as current, desired or
// original.
func (r *Reconciler) collectGarbage(ctx context.Context, s *scope) error {
	builds, err := r.buildsOf(ctx, s.mosc.Name)
	if err != nil {
		return err
	}
	var old []v1alpha1.MachineOSBuild
	for _, b := range builds {
		if b.Name != s.build.Name && machineosbuild.Terminal(&b) {
			old = append(old, b)
		}
	}
	if len(old) <= r.Config.History {
		return nil
	}
	// Only now, with builds to delete, ask which images nodes use: the
	// index answers for each image without listing every node.
	for i := 0; i < len(old); i++ {
		image := old[i].Status.DigestedImagePushSpec
		used, err := r.imageInUse(ctx, image, s.mosc.Status.CurrentImagePullSpec)
		if err != nil {
			return err
		}
		if used {
			old = slices.Delete(old, i, i+1)
			i--
		}
	}
	if len(old) <= r.Config.History {
		return nil
	}
	slices.SortFunc(old, func(a, b v1alpha1.MachineOSBuild) int { return history.NewestFirst(&a, &b) })
	gone := map[string]bool{}
	for i := r.Config.History; i < len(old); i++ {
		gone[old[i].Name] = true
	}
	// An image is kept while any remaining build has it: reproducible
	// builds of different inputs can share a digest, and builds share
	// admin stages.
	kept := map[string]bool{}
	for i := range builds {
		if gone[builds[i].Name] {
			continue
		}
		kept[builds[i].Status.DigestedImagePushSpec] = true
		if st := machineosbuild.FindStage(&builds[i], v1alpha1.BuildStageAdmin); st != nil {
			kept[st.Image] = true
		}
	}
	ownRepo := buildinputs.Repository(s.mosc.Spec.RenderedImagePushSpec) + "@"
	for i := r.Config.History; i < len(old); i++ {
		b := &old[i]
		var images []string
		if image := b.Status.DigestedImagePushSpec; !kept[image] {
			images = append(images, image)
		}
		// Only an admin stage this MachineOSConfig pushed: never the base.
		if st := machineosbuild.FindStage(b, v1alpha1.BuildStageAdmin); st != nil && strings.HasPrefix(st.Image, ownRepo) && st.Image != b.Status.BaseImagePullSpec && !kept[st.Image] {
			images = append(images, st.Image)
		}
		for _, image := range images {
			kept[image] = true // deleted once
		}
		for _, image := range images {
			if image == "" {
				continue
			}
			// Referrers first: an image whose referrers could not be
			// deleted is kept with them rather than leaving them behind,
			// describing nothing.
			if err := attest.DeleteReferrers(ctx, r.Registry, image, s.pushKC); err != nil {
				log.FromContext(ctx).Info("Could not delete the referrers of an old image", "build", b.Name, "image", image, "error", err.Error())
				r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "ImageNotDeleted", "GarbageCollect", "Could not delete the referrers of %s, keeping it: %v", image, registry.Explain(err))
				continue
			}
			if err := r.Registry.Delete(ctx, image, s.pushKC); err != nil {
				// The build goes anyway; a registry that refuses deletes
				// keeps the image, which is safe.
				log.FromContext(ctx).Info("Could not delete an old image", "build", b.Name, "image", image, "error", err.Error())
				r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "ImageNotDeleted", "GarbageCollect", "Could not delete %s: %v", image, err)
				continue
			}
			// Never reused again, even if the same digest is pushed
			// anew: a new push is a new build's to record.
			forgetAdminStage(s.mosc, image)
			log.FromContext(ctx).Info("Deleted an old image", "build", b.Name, "image", image)
		}
		if err := r.deleteBuild(ctx, b); err != nil {
			return err
		}
		log.FromContext(ctx).Info("Deleted an old build", "build", b.Name, "history", r.Config.History)
	}
	return nil
}

// imageInUse says whether the MachineOSConfig's current image is image,
// or any node runs it, is to run it, or booted it before Strata changed
// it.
func (r *Reconciler) imageInUse(ctx context.Context, image, current string) (bool, error) {
	if image == "" {
		return false, nil
	}
	if image == current {
		return true, nil
	}
	var list corev1.NodeList
	if err := r.Client.List(ctx, &list, client.MatchingFields{nodeImageIndex: image}, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("find nodes on %s: %w", image, err)
	}
	return len(list.Items) > 0, nil
}
