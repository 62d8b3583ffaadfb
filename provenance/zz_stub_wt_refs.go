// Package provenance is a stand-in with the API of the provenance
// generator another branch (wt-sbom) writes; it is removed when that
// branch is merged.
package provenance

import "encoding/json"

// ArtifactType is the provenance statement's media type.
const ArtifactType = "application/vnd.in-toto+json"

// Input is what a provenance statement records.
type Input struct {
	Image, ImageDigest, BaseImage, Pool, RenderedConfig string
	MachineOSConfig                                     string
	MachineOSConfigGeneration                           int64
	Strategy                                            string
	Containerfile                                       []byte
	InputHash                                           string
	BuilderID, BuilderVersion                           string
}

// Generate is a stand-in: the inputs as JSON.
func Generate(in Input) ([]byte, error) {
	return json.Marshal(in)
}
