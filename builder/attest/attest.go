package attest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/internal/referrers"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/version"
	"github.com/strata-dev/strata/provenance"
	"github.com/strata-dev/strata/sbom"
)

// BuilderID names the builder in provenance statements. It stays the
// build controller's address: a statement names who built the image, and
// a changed name would change the bytes of every provenance.
const BuilderID = "https://github.com/strata-dev/strata/controllers/build"

// Input is what the SBOM and the provenance of one image say.
type Input struct {
	// Image is the pushed image, repository@sha256:digest.
	Image string
	// Base is the base image by digest.
	Base string
	// AdminStage is the admin stage image the configuration layer was
	// added to, by digest; "" when it is the base or the build ran as one
	// Job.
	AdminStage                string
	Pool                      string
	RenderedConfig            string
	MachineOSConfig           string
	MachineOSConfigGeneration int64
	// SigningKey is the fingerprint of the signing key configured when
	// the image was built; "" when the pool does not sign.
	SigningKey string
	Strategy   v1alpha1.BuildStrategy
	// Result is the rendered build the image was made from.
	Result *containerfile.Result
	// Spec is what the image was made of (the rendered spec, with the
	// signature policy of a signing pool).
	Spec *v1alpha1.MachineConfigSpec
}

// Failure is an attachment that retrying cannot help: an artifact that
// cannot be made, refused credentials, a registry that refuses the
// artifact. Step is the build step it failed in.
type Failure struct {
	Step    v1alpha1.BuildStep
	Message string
}

func (f *Failure) Error() string { return f.Message }

// Attach makes the SBOM and the provenance of in.Image and attaches them
// as its referrers with kc, and returns them as the build's status lists
// them. The error is a *Failure when retrying cannot help; any other
// error may pass (a registry that did not answer).
func Attach(ctx context.Context, reg registry.Client, kc authn.Keychain, in Input) ([]v1alpha1.ImageReferrer, error) {
	artifacts, err := artifacts(in)
	if err != nil {
		return nil, &Failure{Step: v1alpha1.BuildStepPrepare, Message: err.Error()}
	}
	c := referrers.Client{Registry: reg}
	refs := make([]v1alpha1.ImageReferrer, 0, len(artifacts))
	for _, a := range artifacts {
		ref, err := c.Attach(ctx, in.Image, kc, a)
		if err != nil {
			msg := fmt.Sprintf("attach the %s artifact to %s: %v", a.Type, in.Image, registry.Explain(err))
			switch {
			case registry.IsUnauthorized(err):
				return nil, &Failure{Step: v1alpha1.BuildStepAuth, Message: msg}
			case refused(err):
				return nil, &Failure{Step: v1alpha1.BuildStepPush, Message: msg}
			}
			return nil, err
		}
		refs = append(refs, v1alpha1.ImageReferrer{ArtifactType: ref.ArtifactType, Digest: ref.Digest.String()})
	}
	return refs, nil
}

// DeleteReferrers deletes every referrer of image, so that an image can
// be deleted without leaving them behind, describing nothing.
func DeleteReferrers(ctx context.Context, reg registry.Client, image string, kc authn.Keychain) error {
	_, err := (referrers.Client{Registry: reg}).DeleteAll(ctx, image, kc)
	return err
}

// artifacts are the SBOM and the provenance statement of in.Image.
func artifacts(in Input) ([]referrers.Artifact, error) {
	repo, digest, _ := strings.Cut(in.Image, "@")
	var layer []byte
	for _, f := range in.Result.Context {
		if f.Name == containerfile.RootfsName {
			layer = f.Data
		}
	}
	doc, err := sbom.Generate(sbom.Input{
		Image:          repo,
		ImageDigest:    digest,
		BaseImage:      in.Base,
		Pool:           in.Pool,
		RenderedConfig: in.RenderedConfig,
		InputHash:      in.Result.InputHash,
		Layer:          layer,
		Spec:           in.Spec,
	})
	if err != nil {
		return nil, fmt.Errorf("make the SBOM of %s: %w", in.Image, err)
	}
	statement, err := provenance.Generate(provenance.Input{
		Image:                     repo,
		ImageDigest:               digest,
		BaseImage:                 in.Base,
		AdminStage:                in.AdminStage,
		Pool:                      in.Pool,
		RenderedConfig:            in.RenderedConfig,
		MachineOSConfig:           in.MachineOSConfig,
		MachineOSConfigGeneration: in.MachineOSConfigGeneration,
		SigningKey:                in.SigningKey,
		Strategy:                  string(in.Strategy),
		Containerfile:             in.Result.Containerfile,
		InputHash:                 in.Result.InputHash,
		BuilderID:                 BuilderID,
		BuilderVersion:            version.Version,
	})
	if err != nil {
		return nil, fmt.Errorf("make the provenance of %s: %w", in.Image, err)
	}
	return []referrers.Artifact{
		{Type: sbom.ArtifactType, Data: doc},
		{Type: provenance.ArtifactType, Data: statement},
	}, nil
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
