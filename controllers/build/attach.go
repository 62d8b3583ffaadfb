package build

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/internal/referrers"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/status"
	"github.com/strata-dev/strata/internal/version"
	"github.com/strata-dev/strata/provenance"
	"github.com/strata-dev/strata/sbom"
)

// BuilderID names the build controller as the builder in provenance
// statements.
const BuilderID = "https://github.com/strata-dev/strata/controllers/build"

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

// attach makes the SBOM and provenance of image and attaches them as its
// referrers with the push credentials, recording them and the Attach
// stage in the build's status. It returns a failure when retrying cannot
// help (an artifact that cannot be made, refused credentials, a registry
// that refuses the artifact), an error when it can.
func (r *Reconciler) attach(ctx context.Context, s *scope, in *inputs, image string) (*v1alpha1.BuildFailure, error) {
	b := s.build
	st := stageStatus(b, v1alpha1.BuildStageAttach)
	if st.StartTime == nil {
		now := metav1.Now()
		st.StartTime = &now
	}
	fail := func(step v1alpha1.BuildStep, msg string) *v1alpha1.BuildFailure {
		endStage(st)
		return &v1alpha1.BuildFailure{Stage: v1alpha1.BuildStageAttach, Step: step, Message: status.Truncate(msg, 4096)}
	}
	in.signingKey = r.signingIdentity(ctx, s)
	artifacts, err := r.artifacts(s, in, image)
	if err != nil {
		return fail(v1alpha1.BuildStepPrepare, err.Error()), nil
	}
	c := referrers.Client{Registry: r.Registry}
	refs := make([]v1alpha1.ImageReferrer, 0, len(artifacts))
	for _, a := range artifacts {
		ref, err := c.Attach(ctx, image, s.pushKC, a)
		if err != nil {
			switch {
			case registry.IsUnauthorized(err):
				return fail(v1alpha1.BuildStepAuth, fmt.Sprintf("attach the %s artifact to %s: %v", a.Type, image, registry.Explain(err))), nil
			case refused(err):
				return fail(v1alpha1.BuildStepPush, fmt.Sprintf("attach the %s artifact to %s: %v", a.Type, image, registry.Explain(err))), nil
			}
			return nil, err
		}
		refs = append(refs, v1alpha1.ImageReferrer{ArtifactType: ref.ArtifactType, Digest: ref.Digest.String()})
	}
	b.Status.Referrers = refs
	endStage(st)
	return nil, nil
}

// artifacts are the SBOM and the provenance statement of image: the same
// inputs give the same bytes, so a build that attaches them again (after
// a restart, or a rebuild of the same inputs) adds nothing to the
// registry.
func (r *Reconciler) artifacts(s *scope, in *inputs, image string) ([]referrers.Artifact, error) {
	repo, digest, _ := strings.Cut(image, "@")
	var layer []byte
	for _, f := range in.result.Context {
		if f.Name == containerfile.RootfsName {
			layer = f.Data
		}
	}
	doc, err := sbom.Generate(sbom.Input{
		Image:          repo,
		ImageDigest:    digest,
		BaseImage:      in.base,
		Pool:           s.pool.Name,
		RenderedConfig: in.rendered.Name,
		InputHash:      in.result.InputHash,
		Layer:          layer,
		Spec:           in.spec,
	})
	if err != nil {
		return nil, fmt.Errorf("make the SBOM of %s: %w", image, err)
	}
	statement, err := provenance.Generate(provenance.Input{
		Image:                     repo,
		ImageDigest:               digest,
		BaseImage:                 in.base,
		AdminStage:                adminStageOf(s.build, in.base),
		Pool:                      s.pool.Name,
		RenderedConfig:            in.rendered.Name,
		MachineOSConfig:           s.mosc.Name,
		MachineOSConfigGeneration: s.mosc.Generation,
		SigningKey:                in.signingKey,
		Strategy:                  string(s.build.Status.Strategy),
		Containerfile:             in.result.Containerfile,
		InputHash:                 in.result.InputHash,
		BuilderID:                 BuilderID,
		BuilderVersion:            version.Version,
	})
	if err != nil {
		return nil, fmt.Errorf("make the provenance of %s: %w", image, err)
	}
	return []referrers.Artifact{
		{Type: sbom.ArtifactType, Data: doc},
		{Type: provenance.ArtifactType, Data: statement},
	}, nil
}

// adminStageOf is the admin stage image a ConfigLayer build added its
// configuration to, by digest; "" when it has none of its own (the stage
// is the base, or the build ran as one Job). The base is the inputs', not
// the build status's copy of it: that copy is written with the status, so
// an attach retried after a lost status write would not see it, list the
// base as an admin stage and attach a second, different provenance.
func adminStageOf(b *v1alpha1.MachineOSBuild, base string) string {
	st := findStage(b, v1alpha1.BuildStageAdmin)
	if b.Status.Strategy != v1alpha1.ConfigLayerStrategy || st == nil || st.Image == base {
		return ""
	}
	return st.Image
}

// refused tells a registry's refusal (a 4xx other than a timeout or a
// rate limit: an artifact it does not accept, a missing image) from a
// failure that may pass.
func refused(err error) bool {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return false
	}
	switch terr.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return terr.StatusCode >= 400 && terr.StatusCode < 500
}
