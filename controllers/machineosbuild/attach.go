package machineosbuild

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/attest"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/status"
)

// BuilderID names the build controller as the builder in provenance
// statements.
const BuilderID = attest.BuilderID

// attachAndFinish attaches the SBOM and provenance to a pushed image and
// then finishes the build: Succeeded, or Failed in the Attach stage when
// retrying cannot help. A registry that did not answer leaves the build
// Building, says so, and is retried with the controller's backoff: the
// image is there, and a later try attaches the same bytes.
func (r *Reconciler) attachAndFinish(ctx context.Context, s *scope, in *inputs, image string) error {
	b := s.build
	failure, err := r.attach(ctx, s, in, image)
	if err != nil {
		setBuildConditions(b, stateBuilding, "Attaching the SBOM and provenance to "+image+" failed, retrying: "+registry.Explain(err).Error())
		return fmt.Errorf("build %s: attach the SBOM and provenance to %s: %w", b.Name, image, err)
	}
	if failure != nil {
		r.finish(ctx, s, stateFailed, failure, "")
		return nil
	}
	r.finish(ctx, s, stateSucceeded, nil, image)
	return nil
}

// attach attaches the SBOM and provenance of image (builder/attest) with
// the push credentials, recording them and the Attach stage in the
// build's status. It returns a failure when retrying cannot help, an
// error when it can.
func (r *Reconciler) attach(ctx context.Context, s *scope, in *inputs, image string) (*v1alpha1.BuildFailure, error) {
	b := s.build
	st := stageStatus(b, v1alpha1.BuildStageAttach)
	if st.StartTime == nil {
		now := metav1.Now()
		st.StartTime = &now
	}
	refs, err := attest.Attach(ctx, r.Registry, s.pushKC, attest.Input{
		Image:                     image,
		Base:                      in.Base,
		AdminStage:                adminStageOf(b, in.Base),
		Pool:                      s.pool,
		RenderedConfig:            in.Rendered.Name,
		MachineOSConfig:           s.mosc.Name,
		MachineOSConfigGeneration: s.mosc.Generation,
		SigningKey:                r.signingIdentity(ctx, s),
		Strategy:                  b.Status.Strategy,
		Result:                    in.Result,
		Spec:                      in.Spec,
	})
	var failure *attest.Failure
	switch {
	case errors.As(err, &failure):
		endStage(st)
		return &v1alpha1.BuildFailure{Stage: v1alpha1.BuildStageAttach, Step: failure.Step, Message: status.Truncate(failure.Message, 4096)}, nil
	case err != nil:
		return nil, err
	}
	b.Status.Referrers = refs
	endStage(st)
	return nil, nil
}

// adminStageOf is the admin stage image a ConfigLayer build added its
// configuration to, by digest; "" when it has none of its own (the stage
// is the base, or the build ran as one Job). The base is the inputs', not
// the build status's copy of it: that copy is written with the status, so
// an attach retried after a lost status write would not see it, list the
// base as an admin stage and attach a second, different provenance.
func adminStageOf(b *v1alpha1.MachineOSBuild, base string) string {
	st := FindStage(b, v1alpha1.BuildStageAdmin)
	if b.Status.Strategy != v1alpha1.ConfigLayerStrategy || st == nil || st.Image == base {
		return ""
	}
	return st.Image
}
