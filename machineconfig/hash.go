package machineconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// hashLength is how many hex digits of the SHA-256 name a rendered config:
// 128 bits, plenty to avoid collisions while keeping names readable.
const hashLength = 32

// Hash is the content hash of a merged spec. It covers content only, so
// MachineConfigs renamed with the same content hash the same.
func Hash(spec v1alpha1.MachineConfigSpec) (string, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("encode spec for hashing: %w", err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:hashLength], nil
}

// RenderedName is the name of a pool's rendered MachineConfig for a
// content hash.
func RenderedName(pool, hash string) string {
	return "rendered-" + pool + "-" + hash
}
