package provenance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/imageref"
)

// ArtifactType is the OCI artifact type of the provenance referrer.
const ArtifactType = "application/vnd.in-toto+json"

// The statement's and predicate's types, and Strata's build type.
const (
	StatementType = "https://in-toto.io/Statement/v1"
	PredicateType = "https://slsa.dev/provenance/v1"
	BuildType     = "https://strata.dev/build/v1"
)

// Input is what a provenance statement records.
type Input struct {
	// Image is the repository the image is pushed to (no tag or digest);
	// ImageDigest its manifest's digest, "sha256:<hex>".
	Image, ImageDigest string
	// BaseImage is the base image, "repo@sha256:<hex>".
	BaseImage string
	// AdminStage is the admin stage image the configuration layer was
	// added to (strategy ConfigLayer), "repo@sha256:<hex>"; "" when there
	// is none of its own (SingleJob, or the admin stage is the base). It
	// may come from an earlier build, so it is a material of its own: its
	// digest says which lower layers the image has.
	AdminStage string
	// Pool, RenderedConfig: the pool and its rendered MachineConfig.
	Pool, RenderedConfig string
	// MachineOSConfig and its metadata.generation the build was made of.
	MachineOSConfig           string
	MachineOSConfigGeneration int64
	// Strategy is "ConfigLayer" or "SingleJob".
	Strategy string
	// Containerfile is the rendered Containerfile; its sha256 is recorded.
	Containerfile []byte
	// InputHash is the build's input hash (hex).
	InputHash string
	// BuilderID is the builder's URI; BuilderVersion its version.
	BuilderID, BuilderVersion string
	// SigningKey is the fingerprint of the signing key; "" for none.
	SigningKey string
}

// Statement is an in-toto Statement v1 with a SLSA v1 predicate.
type Statement struct {
	Type          string    `json:"_type"`
	Subject       []Subject `json:"subject"`
	PredicateType string    `json:"predicateType"`
	Predicate     Predicate `json:"predicate"`
}

// Subject is an artifact the statement is about.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Predicate is SLSA Provenance v1.
type Predicate struct {
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	RunDetails      RunDetails      `json:"runDetails"`
}

// BuildDefinition says what was built from what.
type BuildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   ExternalParameters   `json:"externalParameters"`
	InternalParameters   InternalParameters   `json:"internalParameters"`
	ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies"`
}

// ExternalParameters are the inputs an admin controls.
type ExternalParameters struct {
	Pool            string          `json:"pool"`
	MachineOSConfig MachineOSConfig `json:"machineOSConfig"`
	RenderedConfig  string          `json:"renderedConfig"`
	Strategy        string          `json:"strategy"`
}

// MachineOSConfig names the MachineOSConfig at the generation built.
type MachineOSConfig struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
}

// InternalParameters are Strata's own.
type InternalParameters struct {
	InputHash string `json:"inputHash"`
	// SigningKey is the signing identity: the fingerprint ("SHA256:" and
	// the hex SHA-256 of the DER public key) of the key the controller
	// signs the image with (spec.signing), as configured when it was
	// built; absent when the image is not signed.
	SigningKey string `json:"signingKey,omitempty"`
}

// ResourceDescriptor is an artifact the build used.
type ResourceDescriptor struct {
	Name   string            `json:"name"`
	URI    string            `json:"uri,omitempty"`
	Digest map[string]string `json:"digest,omitempty"`
}

// RunDetails names the builder.
type RunDetails struct {
	Builder Builder `json:"builder"`
}

// Builder is the builder's id and version.
type Builder struct {
	ID      string            `json:"id"`
	Version map[string]string `json:"version,omitempty"`
}

var hexPattern = regexp.MustCompile(`^[a-f0-9]+$`)

// Generate returns the statement's JSON. An input that is not well formed
// is an error naming the field.
func Generate(in Input) ([]byte, error) {
	base, admin, err := check(in)
	if err != nil {
		return nil, err
	}
	cf := sha256.Sum256(in.Containerfile)
	deps := []ResourceDescriptor{
		image("baseImage", base),
		{Name: "Containerfile", Digest: map[string]string{"sha256": hex.EncodeToString(cf[:])}},
		// A rendered config's name ends in the hash of its content: the
		// name identifies the content.
		{Name: "renderedConfig", URI: "urn:strata.dev:machineconfig:" + in.RenderedConfig},
	}
	if admin != nil {
		deps = append(deps, image("adminStage", *admin))
	}
	st := Statement{
		Type:          StatementType,
		Subject:       []Subject{{Name: in.Image, Digest: map[string]string{"sha256": strings.TrimPrefix(in.ImageDigest, "sha256:")}}},
		PredicateType: PredicateType,
		Predicate: Predicate{
			BuildDefinition: BuildDefinition{
				BuildType: BuildType,
				ExternalParameters: ExternalParameters{
					Pool:            in.Pool,
					MachineOSConfig: MachineOSConfig{Name: in.MachineOSConfig, Generation: in.MachineOSConfigGeneration},
					RenderedConfig:  in.RenderedConfig,
					Strategy:        in.Strategy,
				},
				InternalParameters:   InternalParameters{InputHash: in.InputHash, SigningKey: in.SigningKey},
				ResolvedDependencies: deps,
			},
			RunDetails: RunDetails{Builder: Builder{ID: in.BuilderID, Version: map[string]string{"strata": in.BuilderVersion}}},
		},
	}
	out, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// image is the material of an image by digest.
func image(what string, d name.Digest) ResourceDescriptor {
	return ResourceDescriptor{Name: what, URI: "oci://" + d.Context().Name(), Digest: map[string]string{"sha256": strings.TrimPrefix(d.DigestStr(), "sha256:")}}
}

func check(in Input) (name.Digest, *name.Digest, error) {
	var errs []error
	if _, err := name.NewRepository(in.Image, name.StrictValidation); err != nil || in.Image == "" {
		errs = append(errs, fmt.Errorf("image: %q is not a repository (registry/repository, no tag or digest)", in.Image))
	}
	if !imageref.ValidDigest(in.ImageDigest) {
		errs = append(errs, fmt.Errorf("imageDigest: %q is not sha256:<64 hex digits>", in.ImageDigest))
	}
	base, err := name.NewDigest(in.BaseImage, name.StrictValidation)
	if err != nil {
		errs = append(errs, fmt.Errorf("baseImage: %q is not repository@sha256:<digest>", in.BaseImage))
	}
	var admin *name.Digest
	if in.AdminStage != "" {
		d, err := name.NewDigest(in.AdminStage, name.StrictValidation)
		if err != nil {
			errs = append(errs, fmt.Errorf("adminStage: %q is not repository@sha256:<digest>", in.AdminStage))
		}
		admin = &d
	}
	for _, f := range []struct{ field, value string }{
		{"pool", in.Pool}, {"renderedConfig", in.RenderedConfig}, {"machineOSConfig", in.MachineOSConfig},
		{"builderID", in.BuilderID}, {"builderVersion", in.BuilderVersion},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("%s: must not be empty", f.field))
		}
	}
	// The build type's parameters are documented with these two values;
	// another would be a provenance no verifier's policy expects.
	if s := v1alpha1.BuildStrategy(in.Strategy); s != v1alpha1.ConfigLayerStrategy && s != v1alpha1.SingleJobStrategy {
		errs = append(errs, fmt.Errorf("strategy: %q is not %s or %s", in.Strategy, v1alpha1.ConfigLayerStrategy, v1alpha1.SingleJobStrategy))
	}
	if in.MachineOSConfigGeneration < 1 {
		errs = append(errs, fmt.Errorf("machineOSConfigGeneration: %d is not a generation", in.MachineOSConfigGeneration))
	}
	if !hexPattern.MatchString(in.InputHash) {
		errs = append(errs, fmt.Errorf("inputHash: %q is not a hex digest", in.InputHash))
	}
	if len(errs) > 0 {
		return base, admin, fmt.Errorf("provenance: %w", errors.Join(errs...))
	}
	return base, admin, nil
}
