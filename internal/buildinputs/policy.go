package buildinputs

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/imageref"
	"github.com/strata-dev/strata/sigpolicy"
)

// WithSignaturePolicy is the rendered spec with, for a MachineOSConfig
// that signs (spec.signing), the node's signature policy files added as
// Ignition files (mode 0644, root): the configuration layer carries the
// same bytes the daemon writes before a switch, so that once the image
// boots the node's /etc holds no local modification of them, and the
// keys are part of the inputs (a rotation builds a new image). The
// rendered MachineConfig itself is not changed.
func WithSignaturePolicy(spec *v1alpha1.MachineConfigSpec, mosc *v1alpha1.MachineOSConfig) (*v1alpha1.MachineConfigSpec, error) {
	sg := mosc.Spec.Signing
	if sg == nil {
		return spec, nil
	}
	keys := make([][]byte, 0, len(sg.PublicKeys))
	for _, k := range sg.PublicKeys {
		keys = append(keys, []byte(k))
	}
	files, err := sigpolicy.NodePolicy(imageref.Repository(mosc.Spec.RenderedImagePushSpec), keys)
	if err != nil {
		return nil, fmt.Errorf("spec.signing.publicKeys: %w", err)
	}
	doc := map[string]any{}
	if raw := spec.Config.Raw; len(raw) > 0 {
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("rendered config: %w", err)
		}
	}
	if _, ok := doc["ignition"]; !ok {
		doc["ignition"] = map[string]any{"version": "3.4.0"}
	}
	storage, _ := doc["storage"].(map[string]any)
	if storage == nil {
		storage = map[string]any{}
	}
	list, _ := storage["files"].([]any)
	for _, f := range files {
		list = append(list, map[string]any{
			"path":      f.Path,
			"mode":      0o644,
			"overwrite": true,
			"contents":  map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString(f.Data)},
		})
	}
	storage["files"] = list
	doc["storage"] = storage
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	out := spec.DeepCopy()
	out.Config.Raw = raw
	return out, nil
}
