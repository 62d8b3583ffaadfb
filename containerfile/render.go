package containerfile

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/imageref"
	"github.com/strata-dev/strata/nodeconfig"
)

// LabelPrefix is the prefix of the labels Strata puts on images.
const LabelPrefix = v1alpha1.Prefix

// Labels Render puts on every image.
const (
	LabelRenderedConfig  = LabelPrefix + "rendered-config"
	LabelPool            = LabelPrefix + "pool"
	LabelBaseImage       = LabelPrefix + "base-image"
	LabelBaseImageDigest = LabelPrefix + "base-image-digest"
	LabelInputHash       = LabelPrefix + "input-hash"
)

// Manifest annotations Render gives every image besides its labels: the
// OCI image spec's annotations of the base image.
const (
	AnnotationBaseName   = "org.opencontainers.image.base.name"
	AnnotationBaseDigest = "org.opencontainers.image.base.digest"
)

// Names of the build context's files.
const (
	ContainerfileName = "Containerfile"
	RootfsName        = "rootfs.tar"
	appendDir         = "append"
)

// formatVersion is part of the input hash: a change to how Strata renders
// must give new hashes, so that images of the old format are not reused.
const formatVersion = "strata.dev/containerfile/v1"

// Input is everything one render depends on.
type Input struct {
	// ConfigName is the rendered MachineConfig's name; Pool the pool's.
	ConfigName, Pool string
	// Spec is the rendered (merged) MachineConfig spec.
	Spec *v1alpha1.MachineConfigSpec
	// BaseImage is the base OS image as registry/repository@sha256:digest.
	BaseImage string
	// Arch is the target architecture (amd64, arm64, ppc64le, s390x, or
	// the kernel's spelling x86_64, aarch64).
	Arch string
	// Containerfiles are the MachineOSConfig's containerFile entries.
	Containerfiles []v1alpha1.MachineOSContainerfile
}

// ContextFile is one file of the build context.
type ContextFile struct {
	Name string
	Data []byte
}

// Result is a rendered build: what a builder needs, and what the daemon
// writes on the node.
type Result struct {
	// Containerfile is the build's Containerfile (also in Context).
	Containerfile []byte
	// Context is the build context, sorted by name: the Containerfile, the
	// config layer as rootfs.tar, and appended content under append/.
	Context []ContextFile
	// NodeItems are the /var-bound items and SSH keys the daemon writes.
	NodeItems []nodeconfig.NodeItem
	// Labels are the image labels the Containerfile sets.
	Labels map[string]string
	// Annotations are the image manifest's annotations the builders set:
	// the base's name (by digest, as buildah writes it: a tag would make
	// the image depend on a name the input hash leaves out) and digest,
	// so that scanners tell the base's findings from those of the layers
	// on top, and every label, for tools that read only manifests. Nil
	// for an admin stage, which is no node's image.
	Annotations map[string]string
	// InputHash is the hex sha256 of all inputs, in a canonical form: two
	// inputs that differ only in order where order does not matter have
	// the same hash.
	InputHash string
	// NeedsRun is true when the Containerfile has RUN steps (packages,
	// appends to base files, owners by name, enabling units of the base
	// image, or the admin's own RUN): such a build needs a builder that can
	// run commands in the image, not just add a layer.
	NeedsRun bool
	// Stages is the same image as an admin stage and a configuration
	// layer, for the ConfigLayer strategy.
	Stages *Stages
}

// Render turns a rendered MachineConfig and a MachineOSConfig's
// Containerfile content into a reproducible build. Invalid input renders
// nothing: the error is a *ValidationError naming every problem's field
// (spec.config.* for the MachineConfig, spec.containerFile[*] for the
// MachineOSConfig, baseImage and arch for the rest).
func Render(in Input) (*Result, error) {
	var errs field.ErrorList
	spec := in.Spec
	if spec == nil {
		spec = &v1alpha1.MachineConfigSpec{}
	}
	p, perrs := nodeconfig.BuildPlan(spec, field.NewPath("spec"))
	errs = append(errs, perrs...)

	arch, ok := archOf(in.Arch)
	if !ok {
		errs = append(errs, field.NotSupported(field.NewPath("arch"), in.Arch, []string{"amd64", "arm64", "ppc64le", "s390x"}))
	}
	if spec.KernelType == v1alpha1.KernelType64kPages && ok && arch != v1alpha1.ContainerfileArchARM64 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "kernelType"), spec.KernelType, "the 64k-pages kernel exists only for arm64, not "+in.Arch))
	}
	for _, n := range []struct{ field, value string }{{"configName", in.ConfigName}, {"pool", in.Pool}} {
		// They become label values: keep them to Kubernetes object names.
		if msgs := validation.IsDNS1123Subdomain(n.value); len(msgs) > 0 {
			errs = append(errs, field.Invalid(field.NewPath(n.field), n.value, strings.Join(msgs, "; ")))
		}
	}
	if !imageref.ValidPinned(in.BaseImage) {
		errs = append(errs, field.Invalid(field.NewPath("baseImage"), in.BaseImage, "must be registry/repository@sha256:<digest>: builds must reproduce"))
	}
	admin, aerrs := selectContainerfile(in.Containerfiles, arch, field.NewPath("spec", "containerFile"))
	errs = append(errs, aerrs...)
	if len(errs) > 0 {
		return nil, &nodeconfig.ValidationError{Errs: errs}
	}

	rootfs, err := writeRootfs(fixedEntries(p.Entries))
	if err != nil {
		return nil, err
	}
	var ctx []ContextFile
	if rootfs != nil {
		ctx = append(ctx, ContextFile{Name: RootfsName, Data: rootfs})
	}
	var appendNames [][]string
	n := 0
	for _, e := range p.Edits {
		var names []string
		for _, a := range e.Appends {
			name := fmt.Sprintf("%s/%04d", appendDir, n)
			n++
			ctx = append(ctx, ContextFile{Name: name, Data: a})
			names = append(names, name)
		}
		appendNames = append(appendNames, names)
	}

	stages := renderStages(in, p, admin, rootfs)

	_, digest, _ := strings.Cut(in.BaseImage, "@")
	labels := map[string]string{
		LabelRenderedConfig:  in.ConfigName,
		LabelPool:            in.Pool,
		LabelBaseImage:       in.BaseImage,
		LabelBaseImageDigest: digest,
	}
	body, needsRun := containerfileBody(in, p, rootfs != nil, appendNames, admin, labels)

	nodeItems, err := json.Marshal(p.NodeItems)
	if err != nil {
		return nil, fmt.Errorf("encode node items: %w", err)
	}
	h := sha256.New()
	writeField := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	writeField([]byte(formatVersion))
	writeField([]byte(arch))
	writeField(body)
	for _, f := range ctx {
		writeField([]byte(f.Name))
		writeField(f.Data)
	}
	writeField(nodeItems)
	sum := hex.EncodeToString(h.Sum(nil))
	labels[LabelInputHash] = sum

	annotations := maps.Clone(labels)
	annotations[AnnotationBaseName] = in.BaseImage
	annotations[AnnotationBaseDigest] = digest

	cf := slices.Concat(body, labelLine(LabelInputHash, sum))
	ctx = append(ctx, ContextFile{Name: ContainerfileName, Data: cf})
	slices.SortFunc(ctx, func(a, b ContextFile) int { return strings.Compare(a.Name, b.Name) })
	return &Result{
		Containerfile: cf,
		Context:       ctx,
		NodeItems:     p.NodeItems,
		Labels:        labels,
		Annotations:   annotations,
		InputHash:     sum,
		NeedsRun:      needsRun,
		Stages:        stages,
	}, nil
}
