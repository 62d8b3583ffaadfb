package diskjob

import (
	"context"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/strata-dev/strata/internal/diskartifact"
	"github.com/strata-dev/strata/internal/registry"
)

// Published reads the disk a Job reported (Report.Artifact) from the
// registry: the status is written from the artifact's manifest, not from
// what the pod said, and the caller checks that its subject is the
// build's image.
func Published(ctx context.Context, reg registry.Client, artifact string, kc authn.Keychain) (diskartifact.Disk, error) {
	d, _, err := diskartifact.Describe(ctx, reg, artifact, kc)
	return d, err
}
