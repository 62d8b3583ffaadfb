package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/internal/referrers"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/nodeconfig"
	"github.com/strata-dev/strata/provenance"
	"github.com/strata-dev/strata/sbom"
)

type inspectOptions struct {
	registryConfig string
	insecure       bool
	output         string
	publicKeys     []string
}

func newInspectCommand() *cobra.Command {
	o := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect IMAGE [--registry-config FILE] [--insecure] [-o text|json]",
		Short: "Show what Strata put into an image: base, pool, rendered config, files, kernel arguments, referrers",
		Long: `inspect reads an image Strata built from its registry (by tag or by digest):
its manifest's annotations and its config's labels, which name the base
image (by name and digest), the pool, the rendered MachineConfig and the
input hash; the referrers attached to it (artifact type and digest), found
through the registry's referrers API or, on registries without it, the
referrers tag schema; the sigstore signatures stored as the image's
sha256-<digest>.sig attachment, and with --public-key whether one by each
key verifies; and, from the SBOM referrer when there is one, the
files, directories and links the configuration added with their digest,
mode and owner, and the kernel arguments.

Credentials are read from --registry-config (a Docker config.json or a
containers auth.json with "auths"), else as docker and podman find them
($DOCKER_CONFIG, ~/.docker/config.json, $REGISTRY_AUTH_FILE,
containers/auth.json). --insecure reaches the image's registry over plain
HTTP; registries on loopback addresses are reached over HTTP anyway.`,
		Example: `  # What the worker pool's current image is made of
  stratactl inspect quay.example.com/strata/worker@sha256:...

  # The same as JSON, with the credentials the build pushed with
  stratactl inspect quay.example.com/strata/worker:worker-0123456789abcdef \
      --registry-config push-auth.json -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.registryConfig, "registry-config", "", "registry credentials: a Docker config.json or containers auth.json (default: as docker and podman find them)")
	f.BoolVar(&o.insecure, "insecure", false, "reach the image's registry over plain HTTP")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	f.StringArrayVar(&o.publicKeys, "public-key", nil, "a PEM public key file: say whether a sigstore signature by it verifies (repeatable)")
	return cmd
}

// inspection is what inspect reports; it is the JSON output.
type inspection struct {
	// Image is the image by digest.
	Image string `json:"image"`
	// Base is the image it was built on.
	Base baseImage `json:"base"`
	// Pool, RenderedConfig and InputHash are Strata's labels.
	Pool           string `json:"pool,omitempty"`
	RenderedConfig string `json:"renderedConfig,omitempty"`
	InputHash      string `json:"inputHash,omitempty"`
	// Files, KernelArguments and Units are what the configuration added,
	// from the SBOM; absent without one.
	Files           []sbom.File       `json:"files,omitempty"`
	KernelArguments []string          `json:"kernelArguments,omitempty"`
	Units           []nodeconfig.Unit `json:"units,omitempty"`
	// SBOM says whether an SBOM referrer was found; SBOMError why its
	// content could not be read.
	SBOM      bool   `json:"sbom"`
	SBOMError string `json:"sbomError,omitempty"`
	// Referrers are the artifacts attached to the image.
	Referrers []referrers.Referrer `json:"referrers"`
	// Annotations and Labels are the manifest's and the config's, all of
	// them.
	Annotations map[string]string `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	// Signatures are the image's sigstore signatures.
	Signatures *signatureReport `json:"signatures,omitempty"`
}

type baseImage struct {
	Name   string `json:"name,omitempty"`
	Digest string `json:"digest,omitempty"`
}

func (o *inspectOptions) run(ctx context.Context, out io.Writer, image string) error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("--output %q: want text or json", o.output)
	}
	var kc authn.Keychain = authn.DefaultKeychain
	if o.registryConfig != "" {
		var err error
		if kc, err = registry.KeychainFromFile(o.registryConfig); err != nil {
			return err
		}
	}
	rc := registry.Client{}
	ref, err := rc.ParseReference(image)
	if err != nil {
		return fmt.Errorf("image %q: %w", image, err)
	}
	if o.insecure {
		rc.Insecure = []string{ref.Context().RegistryStr()}
		if ref, err = rc.ParseReference(image); err != nil {
			return fmt.Errorf("image %q: %w", image, err)
		}
	}
	in, err := inspectImage(ctx, rc, kc, ref.String())
	if err != nil {
		return err
	}
	if in.Signatures, err = inspectSignatures(ctx, rc, kc, in.Image, o.publicKeys); err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(in)
	}
	return printInspection(out, in)
}

// inspectImage reads an image, its referrers and its SBOM.
func inspectImage(ctx context.Context, rc registry.Client, kc authn.Keychain, image string) (*inspection, error) {
	ref, err := rc.ParseReference(image)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(ref, registry.Options(ctx, kc)...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", image, registry.Explain(err))
	}
	if desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("%s is an image index (%s): name the image of one platform by digest", image, desc.MediaType)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", image, registry.Explain(err))
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("read the manifest of %s: %w", image, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read the config of %s: %w", image, registry.Explain(err))
	}
	in := &inspection{
		Image:       ref.Context().Name() + "@" + desc.Digest.String(),
		Annotations: m.Annotations,
		Labels:      cf.Config.Labels,
	}
	// Annotations first; images built before Strata annotated them have
	// the labels only.
	value := func(annotation, label string) string {
		if v := m.Annotations[annotation]; v != "" {
			return v
		}
		return cf.Config.Labels[label]
	}
	in.Base = baseImage{
		Name:   value(containerfile.AnnotationBaseName, containerfile.LabelBaseImage),
		Digest: value(containerfile.AnnotationBaseDigest, containerfile.LabelBaseImageDigest),
	}
	in.Pool = value(containerfile.LabelPool, containerfile.LabelPool)
	in.RenderedConfig = value(containerfile.LabelRenderedConfig, containerfile.LabelRenderedConfig)
	in.InputHash = value(containerfile.LabelInputHash, containerfile.LabelInputHash)

	c := referrers.Client{Registry: rc}
	if in.Referrers, err = c.List(ctx, in.Image, kc); err != nil {
		return nil, err
	}
	if in.Referrers == nil {
		in.Referrers = []referrers.Referrer{}
	}
	for _, r := range in.Referrers {
		if r.ArtifactType != sbom.ArtifactType {
			continue
		}
		data, err := c.Read(ctx, in.Image, r, kc)
		if err != nil {
			return nil, err
		}
		in.SBOM = true
		// An SBOM another tool attached is reported as unreadable, with
		// everything else.
		d, err := sbom.Read(data)
		if err != nil {
			in.SBOMError = fmt.Sprintf("SBOM %s: %v", r.Digest, err)
			break
		}
		in.Files, in.KernelArguments, in.Units = d.Files, d.Configuration.KernelArguments, d.Configuration.Units
		break
	}
	return in, nil
}

// printInspection writes the text form.
func printInspection(out io.Writer, in *inspection) error {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, row := range [][2]string{
		{"Image", in.Image},
		{"Base", dash(in.Base.Name)},
		{"Base digest", dash(in.Base.Digest)},
		{"Pool", dash(in.Pool)},
		{"Rendered config", dash(in.RenderedConfig)},
		{"Input hash", dash(in.InputHash)},
	} {
		fmt.Fprintf(w, "%s:\t%s\n", row[0], row[1])
	}
	if err := w.Flush(); err != nil {
		return err
	}
	switch {
	case !in.SBOM:
		fmt.Fprintln(out, "\nNo SBOM referrer: the files and kernel arguments Strata added are not known.")
	case in.SBOMError != "":
		fmt.Fprintf(out, "\nThe files and kernel arguments Strata added are not known: %s\n", in.SBOMError)
	default:
		fmt.Fprintf(out, "\nFiles, directories and links (%d, from the SBOM):\n", len(in.Files))
		if len(in.Files) > 0 {
			fmt.Fprintln(w, "  TYPE\tMODE\tOWNER\tSHA256\tPATH")
			for _, f := range in.Files {
				p := f.Path
				if f.Target != "" {
					p += " -> " + f.Target
				}
				sum := f.SHA256
				if f.Type == "directory" {
					sum = "" // of nothing: SPDX wants one
				}
				fmt.Fprintf(w, "  %s\t%s\t%d:%d\t%s\t%s\n", dash(f.Type), dash(f.Mode), f.UID, f.GID, dash(sum), p)
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "\nKernel arguments (%d, from the SBOM):\n", len(in.KernelArguments))
		for _, k := range in.KernelArguments {
			fmt.Fprintf(out, "  %s\n", k)
		}
		fmt.Fprintf(out, "\nUnits (%d, from the SBOM):\n", len(in.Units))
		for _, u := range in.Units {
			fmt.Fprintf(out, "  %s: %s\n", u.Name, unitChanges(u))
		}
	}
	printSignatures(out, in.Signatures)
	fmt.Fprintf(out, "\nReferrers (%d):\n", len(in.Referrers))
	if len(in.Referrers) > 0 {
		fmt.Fprintln(w, "  TYPE\tDIGEST\tWHAT")
		for _, r := range in.Referrers {
			fmt.Fprintf(w, "  %s\t%s\t%s\n", r.ArtifactType, r.Digest, artifactName(r.ArtifactType))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// artifactName says what an artifact type Strata attaches is.
func artifactName(t string) string {
	switch t {
	case sbom.ArtifactType:
		return "SBOM"
	case provenance.ArtifactType:
		return "provenance"
	case v1alpha1.BootDiskArtifactType:
		return "boot disk"
	}
	return "-"
}

// unitChanges says what the configuration does to a unit.
func unitChanges(u nodeconfig.Unit) string {
	var what []string
	switch {
	case u.Masked:
		what = append(what, "masked")
	case u.Enabled:
		what = append(what, "enabled")
	case u.Disabled:
		what = append(what, "disabled")
	}
	if u.Contents {
		what = append(what, "unit file")
	}
	if len(u.Dropins) > 0 {
		what = append(what, "drop-ins "+strings.Join(u.Dropins, ", "))
	}
	if len(what) == 0 {
		return "-"
	}
	return strings.Join(what, "; ")
}
