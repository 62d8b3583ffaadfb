package layering

import (
	"encoding/json"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/imageref"
)

// SignaturePolicy is the policy a node of mosc's pool verifies with,
// as JSON (the imageSignaturePolicy annotation's value and the first
// boot's --signature-policy-file): its push repository and
// spec.signing's public keys. "" when the MachineOSConfig does not sign.
// The rollout controller and the config server both hand it out, so it
// is made in one place.
func SignaturePolicy(mosc *v1alpha1.MachineOSConfig) (string, error) {
	sg := mosc.Spec.Signing
	if sg == nil {
		return "", nil
	}
	p := v1alpha1.NodeSignaturePolicy{Repository: imageref.Repository(mosc.Spec.RenderedImagePushSpec)}
	for _, k := range sg.PublicKeys {
		p.PublicKeys = append(p.PublicKeys, string(k))
	}
	data, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	return string(data), nil
}
