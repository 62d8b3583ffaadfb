package containerfile

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/nodeconfig"
)

// appendMount is where the build's RUN step sees the context's append/
// directory. It is a bind mount, so the fragments never enter a layer.
const appendMount = "/run/strata-append"

// Package steps. They use dnf, which the image-mode bases Strata targets
// (Fedora, CentOS Stream and RHEL bootc images) carry; `dnf clean all` keeps
// caches out of the layer.
//
// kernelPackages are the packages of each kernel type, as OpenShift's
// on-cluster layering builds install them (the Machine Config Operator's
// GetPackagesForSupportedKernelType): the realtime kernel with
// kernel-rt-kvm, so that a realtime node can still run virtual machines,
// and without the kernel-rt meta-package, which pulls in much more. The
// -modules-core packages not listed come in as dependencies.
var kernelPackages = map[v1alpha1.KernelType][]string{
	v1alpha1.KernelTypeDefault:  {"kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra"},
	v1alpha1.KernelTypeRealtime: {"kernel-rt-core", "kernel-rt-modules", "kernel-rt-modules-extra", "kernel-rt-kvm"},
	v1alpha1.KernelType64kPages: {"kernel-64k-core", "kernel-64k-modules", "kernel-64k-modules-core", "kernel-64k-modules-extra"},
}

// kernelSwap is the step that replaces the base image's default kernel by
// kernel type k's; "" for the default kernel.
func kernelSwap(k v1alpha1.KernelType) string {
	if k == "" || k == v1alpha1.KernelTypeDefault {
		return ""
	}
	pkgs, ok := kernelPackages[k]
	if !ok {
		return ""
	}
	return "dnf -y remove " + strings.Join(kernelPackages[v1alpha1.KernelTypeDefault], " ") + " && \\\n" +
		"\tdnf -y install " + strings.Join(pkgs, " ") + " && \\\n\tdnf clean all"
}

// shellQuote quotes s for sh. Paths and names are validated to have no
// control characters, so a single-quoted word on one line is always right.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func labelLine(k, v string) []byte {
	return []byte(fmt.Sprintf("LABEL %s=%q\n", k, v))
}

// containerfileBody writes the Containerfile without its input-hash label,
// which is computed over this text. Steps go from what needs no commands
// to what does, and the admin's content comes after Strata's own so that
// it can build on them; the labels come last so that it cannot override
// them.
func containerfileBody(in Input, p *nodeconfig.Plan, hasRootfs bool, appendNames [][]string, admin *adminContent, labels map[string]string) ([]byte, bool) {
	var b strings.Builder
	needsRun := false
	run := func(mount string, cmds []string) {
		if writeRun(&b, mount, cmds) {
			needsRun = true
		}
	}

	fmt.Fprintf(&b, "# Rendered by Strata from %s for pool %s. Do not edit.\n", in.ConfigName, in.Pool)
	fmt.Fprintf(&b, "FROM %s\n", in.BaseImage)
	if hasRootfs {
		// ADD unpacks the tar with its modes and numeric owners, in one layer;
		// COPY would make every file root's.
		fmt.Fprintf(&b, "ADD %s /\n", RootfsName)
	}

	var edits []string
	mount := ""
	for i, e := range p.Edits {
		q := shellQuote(e.Path)
		edits = append(edits, fmt.Sprintf("mkdir -p %s", shellQuote(path.Dir(e.Path))), ": >> "+q)
		for _, name := range appendNames[i] {
			mount = fmt.Sprintf("--mount=type=bind,source=%s,target=%s", appendDir, appendMount)
			edits = append(edits, fmt.Sprintf("cat %s >> %s", shellQuote(appendMount+"/"+strings.TrimPrefix(name, appendDir+"/")), q))
		}
		if e.Mode != nil {
			edits = append(edits, fmt.Sprintf("chmod %04o %s", *e.Mode, q))
		}
	}
	run(mount, edits)

	var chowns []string
	for _, c := range p.Chowns {
		owner := c.User
		if c.Group != "" {
			owner += ":" + c.Group
		}
		chowns = append(chowns, fmt.Sprintf("chown -h %s %s", shellQuote(owner), shellQuote(c.Path)))
	}
	slices.Sort(chowns)
	run("", chowns)

	for _, step := range adminPackageSteps(p) {
		run("", step)
	}

	// Units are enabled and disabled after the packages are in: a unit an
	// extension provides (usbguard.service) only exists from then on.
	run("", unitSteps(p))

	if writeAdmin(&b, admin) {
		needsRun = true
	}

	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.Write(labelLine(k, labels[k]))
	}
	return []byte(b.String()), needsRun
}

func quoteAll(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

// adminPackageSteps are the RUN steps of the kernel type and extensions,
// one command list each: the admin stage's, as they do not depend on the
// configuration's files.
func adminPackageSteps(p *nodeconfig.Plan) [][]string {
	var steps [][]string
	if k := kernelSwap(p.KernelType); k != "" {
		steps = append(steps, []string{k})
	}
	if len(p.Packages) > 0 {
		steps = append(steps, []string{"dnf -y install " + quoteAll(p.Packages), "dnf clean all"})
	}
	return steps
}

// unitSteps enables and disables the units only the image knows.
func unitSteps(p *nodeconfig.Plan) []string {
	var units []string
	if len(p.Enable) > 0 {
		units = append(units, "systemctl enable "+quoteAll(p.Enable))
	}
	if len(p.Disable) > 0 {
		units = append(units, "systemctl disable "+quoteAll(p.Disable))
	}
	return units
}

// writeAdmin writes the MachineOSConfig's content, if any, and says
// whether it runs commands.
func writeAdmin(b *strings.Builder, admin *adminContent) bool {
	if admin == nil || strings.TrimSpace(admin.content) == "" {
		return false
	}
	fmt.Fprintf(b, "# containerFile %s from the MachineOSConfig\n", admin.arch)
	b.WriteString(admin.content)
	if !strings.HasSuffix(admin.content, "\n") {
		b.WriteString("\n")
	}
	return admin.needsRun
}

// writeRun writes one RUN step of cmds, if there are any, and says whether
// it wrote one.
func writeRun(b *strings.Builder, mount string, cmds []string) bool {
	if len(cmds) == 0 {
		return false
	}
	b.WriteString("RUN ")
	if mount != "" {
		b.WriteString(mount + " \\\n\t")
	}
	b.WriteString(strings.Join(cmds, " && \\\n\t"))
	b.WriteString("\n")
	return true
}
