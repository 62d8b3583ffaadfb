// Package sbom is a stand-in with the API of the SBOM generator another
// branch (wt-sbom) writes; it is removed when that branch is merged.
package sbom

import (
	"encoding/json"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// ArtifactType is the SBOM's media type.
const ArtifactType = "application/spdx+json"

// Input is what an SBOM describes.
type Input struct {
	Image, ImageDigest, BaseImage, Pool, RenderedConfig, InputHash string
	Layer                                                          []byte
	Spec                                                           *v1alpha1.MachineConfigSpec
}

// Generate is a stand-in: the inputs as JSON.
func Generate(in Input) ([]byte, error) {
	return json.Marshal(in)
}
