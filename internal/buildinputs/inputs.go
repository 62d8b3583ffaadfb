package buildinputs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/internal/status"
	"github.com/strata-dev/strata/machineconfig"
)

// Sources are what a build's inputs are computed from.
type Sources struct {
	MOSC *v1alpha1.MachineOSConfig
	// Pool is the name of the pool the MachineOSConfig layers.
	Pool     string
	Rendered *v1alpha1.MachineConfig
	// Base is the base image by digest (registry/repository@sha256:...).
	Base string
	// Arch is the nodes' architecture, which picks the Containerfile
	// entry.
	Arch string
	// BuilderImage runs the build Jobs; a new one builds anew.
	BuilderImage string
}

// Inputs are everything a build is made from.
type Inputs struct {
	Rendered *v1alpha1.MachineConfig
	// Spec is what the image is made of: the rendered spec, plus the
	// signature policy of a signing MachineOSConfig (WithSignaturePolicy).
	Spec   *v1alpha1.MachineConfigSpec
	Base   string
	Result *containerfile.Result
	// Hash names the inputs (Hash); the build's name carries it.
	Hash string
}

// Compute renders the build of src. Its error says what in the inputs
// cannot be built, naming the MachineOSConfig (and the rendered config):
// retrying cannot help until they change.
func Compute(src Sources) (*Inputs, error) {
	mosc := src.MOSC
	spec, err := WithSignaturePolicy(&src.Rendered.Spec, mosc)
	if err != nil {
		return nil, fmt.Errorf("MachineOSConfig %s: %w", mosc.Name, err)
	}
	result, err := containerfile.Render(containerfile.Input{
		ConfigName:     src.Rendered.Name,
		Pool:           src.Pool,
		Spec:           spec,
		BaseImage:      src.Base,
		Arch:           src.Arch,
		Containerfiles: mosc.Spec.ContainerFile,
	})
	if err != nil {
		return nil, fmt.Errorf("MachineOSConfig %s with rendered MachineConfig %s: %w", mosc.Name, src.Rendered.Name, err)
	}
	return &Inputs{
		Rendered: src.Rendered,
		Spec:     spec,
		Base:     src.Base,
		Result:   result,
		Hash:     Hash(result.InputHash, &mosc.Spec, src.BuilderImage),
	}, nil
}

// Hash covers what the image is made of and where it goes: the rendered
// content, the base image digest and the Containerfile content (all in
// the renderer's input hash), the strategy, the push repository and the
// builder image. Secrets and the base image's name are left out: new
// credentials, or a tag that resolves to the same digest, build nothing
// new.
func Hash(renderHash string, spec *v1alpha1.MachineOSConfigSpec, builderImage string) string {
	h := sha256.New()
	strategy := spec.ImageBuilder.Strategy
	if strategy == "" {
		strategy = v1alpha1.ConfigLayerStrategy
	}
	for _, part := range []string{renderHash, string(spec.ImageBuilder.ImageBuilderType), string(strategy), spec.RenderedImagePushSpec, builderImage} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// BuildName is <machineosconfig>-<16 hex digits of the input hash>.
func BuildName(mosc *v1alpha1.MachineOSConfig, hash string) string {
	return mosc.Name + "-" + hash[:16]
}

// PushSpec is where a build pushes: the MachineOSConfig's repository,
// tagged with the build's name, so that each build's image can be found
// and deleted with it. Nodes never use the tag: they pull the digest.
func PushSpec(mosc *v1alpha1.MachineOSConfig, build string) string {
	tag := build
	if len(tag) > 128 {
		tag = tag[len(tag)-16:]
	}
	return Repository(mosc.Spec.RenderedImagePushSpec) + ":" + tag
}

// AdminTag is where an admin stage is kept: the MachineOSConfig's
// repository, tagged with a hash of the stage's inputs and the builder
// image, so that any build of the same admin inputs finds it.
func AdminTag(mosc *v1alpha1.MachineOSConfig, stageHash, builderImage string) string {
	h := sha256.New()
	for _, part := range []string{stageHash, builderImage} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return Repository(mosc.Spec.RenderedImagePushSpec) + ":admin-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// Repository strips the tag of registry/repository:tag.
func Repository(spec string) string {
	if i := strings.LastIndex(spec, ":"); i > strings.LastIndex(spec, "/") {
		return spec[:i]
	}
	return spec
}

// Strategy is the strategy a build of res runs with, and why it is not
// the one the MachineOSConfig asks for.
func Strategy(mosc *v1alpha1.MachineOSConfig, res *containerfile.Result) (v1alpha1.BuildStrategy, string) {
	if mosc.Spec.ImageBuilder.Strategy == v1alpha1.SingleJobStrategy {
		return v1alpha1.SingleJobStrategy, ""
	}
	// An empty strategy is the default, ConfigLayer (an object written
	// before the field existed).
	if why := res.Stages.NeedsJob; why != "" {
		return v1alpha1.SingleJobStrategy, status.Truncate(why+": built in one Job", 1024)
	}
	return v1alpha1.ConfigLayerStrategy, ""
}

// OSImageURLSource names the MachineConfig whose osImageURL the rendered
// config carries, by the merge's own rule (machineconfig.OSImageURLSource)
// over sources, the MachineConfigs the rendered config lists: "MachineConfig
// <name>", or the rendered config when no source (any longer) carries it.
func OSImageURLSource(rendered *v1alpha1.MachineConfig, sources []v1alpha1.MachineConfig) string {
	name := machineconfig.OSImageURLSource(sources)
	for i := range sources {
		if sources[i].Name == name && sources[i].Spec.OSImageURL == rendered.Spec.OSImageURL {
			return "MachineConfig " + name
		}
	}
	return "rendered MachineConfig " + rendered.Name
}

// Secrets are the names of the Secrets a MachineOSConfig names (in the
// controller's namespace): a change of one may let a build go on.
func Secrets(spec *v1alpha1.MachineOSConfigSpec) []string {
	names := []string{spec.RenderedImagePushSecret.Name}
	for _, ref := range []*v1alpha1.SecretReference{spec.BaseImagePullSecret, spec.RenderedImagePullSecret} {
		if ref != nil && ref.Name != "" {
			names = append(names, ref.Name)
		}
	}
	if spec.Signing != nil {
		names = append(names, spec.Signing.KeySecret.Name)
	}
	return names
}
