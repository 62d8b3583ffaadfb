package node

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/history"
	"github.com/strata-dev/strata/internal/imageref"
	"github.com/strata-dev/strata/internal/layering"
)

// newNodes is the pool's status.newNodes: what a node joining the pool
// now starts from (the config server serves it). It follows the target
// while the rollout moves nodes to it, so that a new node is neither
// behind the pool nor, once the rollout goes on, left out: the rollout
// takes it like any node. It keeps what it was (prev) while the rollout
// moves no node to the target: a target still waiting for its build or
// approval (there is no target image), a paused pool. A halted rollout
// gives new nodes what this controller released before the image it is
// stuck on: prev, when it is not that image, else released, the newest
// earlier build of the pool's MachineOSConfig that may roll out
// (previousRelease). Nothing a daemon reports is an input: a node's token
// can say anything of its own node, and must not choose another's image.
// A pool that has nothing to give keeps it absent: the config server
// serves nothing.
func newNodes(prev *v1alpha1.NewNodeStatus, t target, paused, halted bool, released *v1alpha1.NewNodeStatus) *v1alpha1.NewNodeStatus {
	if t.Waiting != "" || t.Config == "" {
		return prev
	}
	if halted {
		if prev != nil && prev.Image != t.Image {
			return prev
		}
		return released
	}
	if paused && prev != nil {
		return prev
	}
	return &v1alpha1.NewNodeStatus{Image: t.Image, Config: t.Config}
}

// previousRelease is what new nodes of a halted layered pool start from
// once status.newNodes had already moved to the stuck image: the newest
// build of the pool's MachineOSConfig other than the one of image that
// the rollout would release (succeeded with an image by digest, approved
// where approval is required, signed where the pool signs), with its
// rendered config; nil when there is none or the pool is not layered.
// Builds are written by the build controller and approvers only.
func (r *Reconciler) previousRelease(ctx context.Context, pool *v1alpha1.MachineConfigPool, image string) (*v1alpha1.NewNodeStatus, error) {
	mosc, err := layering.Holder(ctx, r.Client, pool)
	if err != nil || mosc == nil {
		return nil, err
	}
	var builds v1alpha1.MachineOSBuildList
	if err := r.Client.List(ctx, &builds, client.MatchingLabels{v1alpha1.MachineOSConfigLabel: mosc.Name}); err != nil {
		return nil, err
	}
	slices.SortFunc(builds.Items, func(a, b v1alpha1.MachineOSBuild) int { return history.NewestFirst(&a, &b) })
	for i := range builds.Items {
		b := &builds.Items[i]
		if img := b.Status.DigestedImagePushSpec; img != image && releasable(mosc, b) {
			return &v1alpha1.NewNodeStatus{Image: img, Config: b.Spec.MachineConfig.Name}, nil
		}
	}
	return nil, nil
}

// releasable says whether the rollout would give a build's image to
// nodes: succeeded with an image by digest, approved where the
// MachineOSConfig requires approval, signed where it signs.
func releasable(mosc *v1alpha1.MachineOSConfig, b *v1alpha1.MachineOSBuild) bool {
	if !metav1.IsControlledBy(b, mosc) || !meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildSucceeded) ||
		!imageref.ValidPinned(b.Status.DigestedImagePushSpec) {
		return false
	}
	if mosc.Spec.ImageApproval == v1alpha1.ImageApprovalRequired && !meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildImageApproved) {
		return false
	}
	if mosc.Spec.Signing != nil && !meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildImageSigned) {
		return false
	}
	return true
}
