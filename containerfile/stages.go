package containerfile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-dev/strata/nodeconfig"
)

// adminFormatVersion is part of the admin stage's input hash, for the
// same reason as formatVersion.
const adminFormatVersion = "strata.dev/containerfile/admin/v1"

// Stages is the image the ConfigLayer strategy builds: an admin stage,
// then the configuration as one layer on top. The stage depends only on
// the base image, the kernel type, the extensions and the MachineOSConfig's
// Containerfile content, so a configuration change reuses it and costs one
// small layer.
type Stages struct {
	// Admin is the admin stage's build: a Containerfile FROM the base with
	// the kernel type, the extensions and the MachineOSConfig's content, and
	// its context; its InputHash covers exactly those. Nil when the stage
	// would be the base image unchanged.
	Admin *Result
	// Layer is the configuration layer as an uncompressed tar: what the
	// single-Job build ADDs as rootfs.tar, without the parent directories
	// the configuration does not declare. Only the admin stage knows
	// those (their modes and owners, and which are symlinks), so the
	// builder that appends the layer adds them as the stage has them,
	// as unpacking rootfs.tar in a build does (builder/direct). Nil when
	// the configuration adds nothing to the image.
	Layer []byte
	// NeedsJob says why the configuration itself takes a RUN step (an
	// append to a file of the base image, an owner by name, a unit of the
	// base image to enable or disable) and so cannot be a layer made
	// without running the image; "" when it can.
	NeedsJob string
}

// renderStages splits a validated plan into the admin stage and the
// configuration layer. rootfs is the plan's rootfs.tar, which is the
// layer: it is written once per render (the tar was most of a warm
// render's cost), and shared, not copied: the content may be megabytes,
// the build controller holds a render per running build, and nothing
// writes either after Render (the capacity is cut, so that an append
// to one cannot show in the other).
func renderStages(in Input, p *nodeconfig.Plan, admin *adminContent, rootfs []byte) *Stages {
	st := &Stages{NeedsJob: needsJob(p)}

	var b strings.Builder
	fmt.Fprintf(&b, "# Admin stage rendered by Strata for pool %s. Do not edit.\n", in.Pool)
	fmt.Fprintf(&b, "FROM %s\n", in.BaseImage)
	needsRun := false
	for _, step := range adminPackageSteps(p) {
		needsRun = writeRun(&b, "", step) || needsRun
	}
	hasContent := admin != nil && strings.TrimSpace(admin.content) != ""
	if hasContent {
		needsRun = writeAdmin(&b, admin) || needsRun
	}
	if needsRun || hasContent {
		body := []byte(b.String())
		arch, _ := archOf(in.Arch)
		h := sha256.New()
		for _, part := range []string{adminFormatVersion, string(arch), string(body)} {
			fmt.Fprintf(h, "%d:", len(part))
			h.Write([]byte(part))
		}
		st.Admin = &Result{
			Containerfile: body,
			Context:       []ContextFile{{Name: ContainerfileName, Data: body}},
			InputHash:     hex.EncodeToString(h.Sum(nil)),
			NeedsRun:      needsRun,
		}
	}

	st.Layer = rootfs[:len(rootfs):len(rootfs)]
	return st
}

// needsJob names what in the configuration only a RUN step can do, or "".
func needsJob(p *nodeconfig.Plan) string {
	var why []string
	for _, e := range p.Edits {
		why = append(why, "appends to "+e.Path+", a file of the base image")
	}
	for _, c := range p.Chowns {
		owner := c.User
		if c.Group != "" {
			owner += ":" + c.Group
		}
		why = append(why, fmt.Sprintf("gives %s to %s by name, which only the image resolves", c.Path, owner))
	}
	if len(p.Enable) > 0 {
		why = append(why, "enables "+strings.Join(p.Enable, ", ")+", without their contents in the configuration")
	}
	if len(p.Disable) > 0 {
		why = append(why, "disables "+strings.Join(p.Disable, ", "))
	}
	if len(why) == 0 {
		return ""
	}
	slices.Sort(why)
	const show = 3
	if len(why) > show {
		why = append(why[:show], fmt.Sprintf("and %d more", len(why)-show))
	}
	return "the configuration " + strings.Join(why, "; ")
}
