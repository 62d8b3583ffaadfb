package nodeconfig

import (
	"archive/tar"
	"bytes"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	vpath "github.com/coreos/vcontext/path"
	"github.com/coreos/vcontext/report"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

const (
	unitDir = "/etc/systemd/system"
	// kargsPath is the one kargs.d file Strata writes. The "10-" prefix
	// leaves room for the base image's own files on either side.
	kargsPath = "/usr/lib/bootc/kargs.d/10-strata.toml"
)

var (
	// ownerNamePattern matches user and group names that are safe to pass
	// to chown unquoted by meaning (no ':' or leading '-').
	ownerNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_.-]*\$?$`)
)

// Entry is one item of the image's configuration layer.
type Entry struct {
	Path     string // absolute
	Type     byte   // tar.TypeReg, TypeDir, TypeSymlink or TypeLink
	Mode     int64
	UID, GID int
	Data     []byte
	Target   string      // link target (absolute path for hard links)
	origin   *field.Path // the field that wrote it, for errors
}

// Edit is a baked file without a source: Ignition keeps the file the
// base has (creating it empty if absent) and appends to it, which only a
// build step that sees the base can do.
type Edit struct {
	Path    string
	Appends [][]byte
	Mode    *int
}

// Chown sets an owner that is not known at render time (a name, which
// only the image's /etc/passwd resolves) or that belongs to a file an
// Edit makes. User and Group are names or numeric ids; "" leaves one as
// it is.
type Chown struct {
	Path, User, Group string
}

// Plan is everything a valid MachineConfig spec turns into, before it is
// written out as a Containerfile and layer (package containerfile) or as
// files on the node (the daemon). The renderer and ValidateMachineConfigSpec
// build the same plan, so that the render controller and the builder can
// never disagree on what is valid. A Plan is read, never modified.
type Plan struct {
	// Entries are the image's files, directories and links by path,
	// the kargs.d file and the links that enable units included.
	Entries map[string]*Entry
	// Edits are sorted by path.
	Edits  []Edit
	Chowns []Chown
	// Enable are units of the base image to enable at build time;
	// Disable units to disable at build time, with or without contents.
	// Both sorted and unique.
	Enable, Disable []string
	// KernelArguments are spec.kernelArguments split into arguments,
	// then Ignition's kernelArguments.shouldExist not already present.
	KernelArguments []string
	// kargOrigins are the fields of KernelArguments, one each, for
	// errors.
	kargOrigins []*field.Path
	// NodeItems are what the daemon writes; see NodeItem.
	NodeItems []NodeItem
	// Packages are the packages of spec.extensions, sorted and unique.
	Packages   []string
	KernelType v1alpha1.KernelType
}

// ValidateMachineConfigSpec returns everything the renderer
// (containerfile.Render) would refuse in spec,
// with field paths under fldPath (usually field.NewPath("spec")) such as
// spec.config.storage.files[3].path and the offending value. It is the one
// validator of MachineConfigs: the render controller calls it on each
// MachineConfig and on the merged result, and the renderer refuses any
// spec it finds a problem in.
func ValidateMachineConfigSpec(spec *v1alpha1.MachineConfigSpec, fldPath *field.Path) field.ErrorList {
	_, errs := BuildPlan(spec, fldPath)
	return errs
}

// ValidateMergedSpec is ValidateMachineConfigSpec for the merge of
// MachineConfigs that each passed it, with the merged Ignition config
// already parsed: the render controller's check of a pool's merged
// configuration. Ignition's full validator walks the config by reflection
// and costs about a millisecond per ten files, most of a render of a large
// pool; it has already seen every entry of every source, so here only the
// rules that span entries run again: Ignition's own (Storage.Validate,
// Systemd.Validate: a file under a link, for example) and all of Strata's.
// The renderer still runs the full validator on the rendered config
// before a build.
func ValidateMergedSpec(spec *v1alpha1.MachineConfigSpec, cfg ign.Config, fldPath *field.Path) field.ErrorList {
	cfgPath := fldPath.Child("config")
	var rpt report.Report
	rpt.Merge(cfg.Storage.Validate(vpath.New("json", "storage")))
	rpt.Merge(cfg.Systemd.Validate(vpath.New("json", "systemd")))
	if rpt.IsFatal() {
		return ignitionFieldErrors(cfgPath, spec.Config.Raw, errors.New("config is not valid"), rpt)
	}
	_, errs := buildPlanParsed(spec, fldPath, func() (ign.Config, field.ErrorList) { return cfg, nil })
	return errs
}

// BuildPlan validates spec and plans it, with field errors under fldPath
// as ValidateMachineConfigSpec returns them; the plan is nil when there
// is any. Ignition configs are parsed through ParseIgnition's cache.
func BuildPlan(spec *v1alpha1.MachineConfigSpec, fldPath *field.Path) (*Plan, field.ErrorList) {
	return buildPlanParsed(spec, fldPath, func() (ign.Config, field.ErrorList) {
		cfg, rpt, err := parseIgnitionCached(spec.Config.Raw)
		if err != nil {
			return cfg, ignitionFieldErrors(fldPath.Child("config"), spec.Config.Raw, err, rpt)
		}
		return cfg, nil
	})
}

func buildPlanParsed(spec *v1alpha1.MachineConfigSpec, fldPath *field.Path, parse func() (ign.Config, field.ErrorList)) (*Plan, field.ErrorList) {
	p := &Plan{Entries: map[string]*Entry{}}
	var errs field.ErrorList

	for i, a := range spec.KernelArguments {
		// An entry may hold several arguments, as OpenShift's daemon reads
		// it: split on spaces outside double quotes.
		kp := fldPath.Child("kernelArguments").Index(i)
		args := splitKernelArguments(a)
		if len(args) == 0 {
			errs = append(errs, field.Invalid(kp, short(a), "must hold at least one argument"))
		}
		for _, arg := range args {
			if msg := checkArg(arg); msg != "" {
				errs = append(errs, field.Invalid(kp, short(arg), msg))
			}
			p.kargOrigins = append(p.kargOrigins, kp)
		}
		p.KernelArguments = append(p.KernelArguments, args...)
	}

	seen := map[string]bool{}
	var names []string
	for i, e := range spec.Extensions {
		ep := fldPath.Child("extensions").Index(i)
		_, known := extensionPackages[e]
		switch {
		case !known:
			errs = append(errs, field.NotSupported(ep, short(e), extensionNames))
		case seen[e]:
			errs = append(errs, field.Duplicate(ep, e))
		case extensionNeedsDefaultKernel[e] && (spec.KernelType == v1alpha1.KernelTypeRealtime || spec.KernelType == v1alpha1.KernelType64kPages):
			errs = append(errs, field.Forbidden(ep, e+" matches only the default kernel, not kernelType "+string(spec.KernelType)))
		default:
			seen[e] = true
			names = append(names, e)
		}
	}
	p.Packages = packagesOf(names)

	switch spec.KernelType {
	case "", v1alpha1.KernelTypeDefault, v1alpha1.KernelTypeRealtime, v1alpha1.KernelType64kPages:
		p.KernelType = spec.KernelType
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("kernelType"), spec.KernelType,
			[]v1alpha1.KernelType{v1alpha1.KernelTypeDefault, v1alpha1.KernelTypeRealtime, v1alpha1.KernelType64kPages}))
	}

	cfgPath := fldPath.Child("config")
	cfg, parseErrs := parse()
	if len(parseErrs) > 0 {
		return nil, append(errs, parseErrs...)
	}
	w := &walker{Plan: p, path: cfgPath, content: newContentBudget()}
	w.ignitionSection(&cfg)
	w.storage(&cfg.Storage)
	w.systemd(&cfg.Systemd)
	w.passwd(&cfg.Passwd)
	w.kernelArguments(&cfg.KernelArguments)
	errs = append(errs, w.errs...)
	if ferr := checkCommandLine(p.KernelArguments, p.kargOrigins); ferr != nil {
		errs = append(errs, ferr)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	// A file edited at build time must not also be a layer entry: the
	// layer would be unpacked first and the edit would silently change it.
	for _, e := range p.Edits {
		if old, ok := p.Entries[e.Path]; ok {
			errs = append(errs, field.Invalid(old.origin, e.Path, "the same path is also a file without contents in storage.files"))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	slices.SortFunc(p.Edits, func(a, b Edit) int { return strings.Compare(a.Path, b.Path) })
	if len(p.KernelArguments) > 0 {
		if ferr := p.add(&Entry{Path: kargsPath, Type: tar.TypeReg, Mode: 0o644, Data: kargsTOML(p.KernelArguments), origin: fldPath.Child("kernelArguments")}); ferr != nil {
			return nil, field.ErrorList{ferr}
		}
	}
	sortNodeItems(p.NodeItems)
	return p, nil
}

// walker collects the plan and the errors of one Ignition config.
type walker struct {
	*Plan
	path    *field.Path // spec.config
	errs    field.ErrorList
	content contentBudget // of the decoded files and appends, see limits.go
}

func (w *walker) fail(err *field.Error) { w.errs = append(w.errs, err) }

// add puts an entry into the image, refusing a second, different writer of
// the same path (for example a storage file and a systemd unit of the same
// name). Identical entries, such as two units wanted by the same target
// through the same link, are one.
func (p *Plan) add(e *Entry) *field.Error {
	old, ok := p.Entries[e.Path]
	if !ok {
		p.Entries[e.Path] = e
		return nil
	}
	if old.Type == e.Type && old.Target == e.Target && old.Mode == e.Mode &&
		old.UID == e.UID && old.GID == e.GID && bytes.Equal(old.Data, e.Data) {
		return nil
	}
	return field.Invalid(e.origin, e.Path, "the same path is also written by "+old.origin.String())
}

func (w *walker) ignitionSection(cfg *ign.Config) {
	cp := w.path.Child("ignition", "config")
	const why = "the image is built once, offline: Ignition configs cannot fetch or include other configs"
	for i := range cfg.Ignition.Config.Merge {
		w.fail(field.Forbidden(cp.Child("merge").Index(i), why))
	}
	if hasSource(cfg.Ignition.Config.Replace) {
		w.fail(field.Forbidden(cp.Child("replace"), why))
	}
	for i := range cfg.Ignition.Security.TLS.CertificateAuthorities {
		w.fail(field.Forbidden(w.path.Child("ignition", "security", "tls", "certificateAuthorities").Index(i),
			"certificate authorities only serve remote sources, which are not supported; put CA files under storage.files"))
	}
}

func (w *walker) storage(s *ign.Storage) {
	sp := w.path.Child("storage")
	const why = "disk layout cannot be changed by an OS image; set it at installation"
	for i := range s.Disks {
		w.fail(field.Forbidden(sp.Child("disks").Index(i), why))
	}
	for i := range s.Raid {
		w.fail(field.Forbidden(sp.Child("raid").Index(i), why))
	}
	for i := range s.Filesystems {
		w.fail(field.Forbidden(sp.Child("filesystems").Index(i), why))
	}
	for i := range s.Luks {
		w.fail(field.Forbidden(sp.Child("luks").Index(i), why))
	}

	baked := map[string]bool{} // baked files with content, the only valid hard link targets in the image
	node := map[string]bool{}  // files bound for /var
	for i := range s.Files {
		w.file(&s.Files[i], sp.Child("files").Index(i), baked, node)
	}
	for i := range s.Directories {
		w.directory(&s.Directories[i], sp.Child("directories").Index(i))
	}
	for i := range s.Links {
		w.link(&s.Links[i], sp.Child("links").Index(i), baked, node)
	}
}

// node checks what is common to files, directories and links, and returns
// the numeric owner ids for the tar header, the owners to resolve by name
// at build time, and whether the node is valid.
func (w *walker) node(n *ign.Node, np *field.Path) (uid, gid int, user, group *Owner, ok bool) {
	ok = true
	if msg := checkPath(n.Path); msg != "" {
		w.fail(field.Invalid(np.Child("path"), n.Path, msg))
		ok = false
	}
	var uok, gok bool
	uid, user, uok = w.owner(n.User.ID, n.User.Name, np.Child("user"))
	gid, group, gok = w.owner(n.Group.ID, n.Group.Name, np.Child("group"))
	return uid, gid, user, group, ok && uok && gok
}

func (w *walker) owner(id *int, name *string, op *field.Path) (int, *Owner, bool) {
	switch {
	case id != nil && name != nil && *name != "":
		w.fail(field.Invalid(op, *name, "set either id or name, not both"))
		return 0, nil, false
	case id != nil:
		if *id < 0 || *id > 1<<32-2 {
			w.fail(field.Invalid(op.Child("id"), *id, "must be between 0 and 4294967294"))
			return 0, nil, false
		}
		return *id, &Owner{ID: id}, true
	case name != nil && *name != "":
		if len(*name) > 256 || !ownerNamePattern.MatchString(*name) {
			w.fail(field.Invalid(op.Child("name"), short(*name), "must be a user or group name: letters, digits, '_', '.', '-', not starting with '-'"))
			return 0, nil, false
		}
		return 0, &Owner{Name: *name}, true
	}
	return 0, nil, true
}

// needsChown says whether an owner must be set by a build step: names are
// only known inside the image.
func needsChown(user, group *Owner) bool {
	return (user != nil && user.Name != "") || (group != nil && group.Name != "")
}

func ownerString(o *Owner) string {
	switch {
	case o == nil:
		return ""
	case o.Name != "":
		return o.Name
	default:
		return strconv.Itoa(*o.ID)
	}
}

func (w *walker) file(f *ign.File, fp *field.Path, baked, node map[string]bool) {
	uid, gid, user, group, ok := w.node(&f.Node, fp)
	var contents []byte
	if hasSource(f.Contents) {
		data, decoded := w.content.decode(f.Contents, fp.Child("contents"), w.fail)
		ok = ok && decoded
		contents = data
	}
	var appends [][]byte
	for j, a := range f.Append {
		ap := fp.Child("append").Index(j)
		if !hasSource(a) {
			w.fail(field.Required(ap.Child("source"), "an append entry needs a source"))
			ok = false
			continue
		}
		data, decoded := w.content.decode(a, ap, w.fail)
		if !decoded {
			ok = false
			continue
		}
		appends = append(appends, data)
	}
	if !ok {
		return
	}
	mode := 0o644
	if f.Mode != nil {
		mode = *f.Mode
	}
	if varBound(f.Path) {
		node[f.Path] = true
		// Ignition leaves an existing file alone unless overwrite is true;
		// OpenShift's merge sets an unset overwrite to true, and its daemon
		// rewrites every file on each update, so that a changed file
		// reaches nodes that already have the old one. Do the same for a
		// file with contents: overwrite needs contents in Ignition, and a
		// file without them only appends.
		overwrite := hasSource(f.Contents)
		if f.Overwrite != nil {
			overwrite = *f.Overwrite
		}
		w.NodeItems = append(w.NodeItems, NodeItem{
			Kind: NodeFile, Path: f.Path, Mode: &mode, User: user, Group: group,
			Overwrite: overwrite,
			Replace:   hasSource(f.Contents), Contents: contents, Append: appends,
		})
		return
	}
	if !hasSource(f.Contents) {
		w.Edits = append(w.Edits, Edit{Path: f.Path, Appends: appends, Mode: f.Mode})
		if user != nil || group != nil {
			w.Chowns = append(w.Chowns, Chown{Path: f.Path, User: ownerString(user), Group: ownerString(group)})
		}
		return
	}
	// Content and appends are both known: the file is complete at render
	// time and needs no build step.
	for _, a := range appends {
		contents = append(contents, a...)
	}
	if ferr := w.add(&Entry{Path: f.Path, Type: tar.TypeReg, Mode: int64(mode), UID: uid, GID: gid, Data: contents, origin: fp.Child("path")}); ferr != nil {
		w.fail(ferr)
		return
	}
	baked[f.Path] = true
	if needsChown(user, group) {
		w.Chowns = append(w.Chowns, Chown{Path: f.Path, User: ownerString(user), Group: ownerString(group)})
	}
}

func (w *walker) directory(d *ign.Directory, dp *field.Path) {
	uid, gid, user, group, ok := w.node(&d.Node, dp)
	if !ok {
		return
	}
	mode := 0o755
	if d.Mode != nil {
		mode = *d.Mode
	}
	if varBound(d.Path) {
		w.NodeItems = append(w.NodeItems, NodeItem{
			Kind: NodeDirectory, Path: d.Path, Mode: &mode, User: user, Group: group,
			Overwrite: d.Overwrite != nil && *d.Overwrite,
		})
		return
	}
	if ferr := w.add(&Entry{Path: d.Path, Type: tar.TypeDir, Mode: int64(mode), UID: uid, GID: gid, origin: dp.Child("path")}); ferr != nil {
		w.fail(ferr)
		return
	}
	if needsChown(user, group) {
		w.Chowns = append(w.Chowns, Chown{Path: d.Path, User: ownerString(user), Group: ownerString(group)})
	}
}

func (w *walker) link(l *ign.Link, lp *field.Path, baked, node map[string]bool) {
	uid, gid, user, group, ok := w.node(&l.Node, lp)
	hard := l.Hard != nil && *l.Hard
	target := ""
	if l.Target != nil {
		target = *l.Target
	}
	tp := lp.Child("target")
	switch {
	case target == "":
		w.fail(field.Required(tp, "a link needs a target"))
		return
	case strings.IndexFunc(target, unicode.IsControl) >= 0:
		w.fail(field.Invalid(tp, short(target), "must not contain control characters"))
		return
	case hard:
		// A hard link is made when the layer is unpacked, so its target
		// must be a file of the same layer (or the same node write).
		if msg := checkPath(target); msg != "" {
			w.fail(field.Invalid(tp, target, msg))
			return
		}
		if ok && varBound(l.Path) != varBound(target) {
			w.fail(field.Invalid(tp, target, "a hard link and its target must both be bound for /var or both be in the image"))
			return
		}
		if ok && !baked[target] && !node[target] {
			w.fail(field.Invalid(tp, target, "the target of a hard link must be a file with contents in storage.files of the same config"))
			return
		}
	}
	if !ok {
		return
	}
	if varBound(l.Path) {
		w.NodeItems = append(w.NodeItems, NodeItem{
			Kind: NodeLink, Path: l.Path, User: user, Group: group,
			Overwrite: l.Overwrite != nil && *l.Overwrite, Target: target, Hard: hard,
		})
		return
	}
	e := &Entry{Path: l.Path, Type: tar.TypeSymlink, Mode: 0o777, UID: uid, GID: gid, Target: target, origin: lp.Child("path")}
	if hard {
		// A hard link shares its target's inode. Unpackers apply a hard
		// link header's mode and owner to that inode, so they must be the
		// target's, not the link's own.
		t := w.Entries[target]
		e.Type, e.Mode, e.UID, e.GID = tar.TypeLink, t.Mode, t.UID, t.GID
	}
	if ferr := w.add(e); ferr != nil {
		w.fail(ferr)
		return
	}
	if !hard && needsChown(user, group) {
		w.Chowns = append(w.Chowns, Chown{Path: l.Path, User: ownerString(user), Group: ownerString(group)})
	}
}

func (w *walker) systemd(s *ign.Systemd) {
	up := w.path.Child("systemd", "units")
	withContents := map[string]int{} // unit name -> index, for units whose file Strata writes
	for i := range s.Units {
		u := &s.Units[i]
		if validUnitName(u.Name) && u.Contents != nil {
			withContents[u.Name] = i
		}
	}
	var enableLater []int
	for i := range s.Units {
		u := &s.Units[i]
		p := up.Index(i)
		if !validUnitName(u.Name) {
			w.fail(field.Invalid(p.Child("name"), short(u.Name), "must be a unit file name with a type suffix, such as foo.service"))
			continue
		}
		masked := u.Mask != nil && *u.Mask
		enabled := u.Enabled != nil && *u.Enabled
		disabled := u.Enabled != nil && !*u.Enabled
		if masked && u.Contents != nil {
			w.fail(field.Invalid(p.Child("mask"), true, "a masked unit is a link to /dev/null and cannot also have contents"))
			continue
		}
		if masked && enabled {
			w.fail(field.Invalid(p.Child("enabled"), true, "a masked unit cannot be enabled"))
			continue
		}
		unitPath := unitDir + "/" + u.Name
		if u.Contents != nil {
			if ferr := w.add(&Entry{Path: unitPath, Type: tar.TypeReg, Mode: 0o644, Data: []byte(*u.Contents), origin: p.Child("name")}); ferr != nil {
				w.fail(ferr)
			}
		}
		if masked {
			if ferr := w.add(&Entry{Path: unitPath, Type: tar.TypeSymlink, Mode: 0o777, Target: "/dev/null", origin: p.Child("mask")}); ferr != nil {
				w.fail(ferr)
			}
		}
		for j, d := range u.Dropins {
			dp := p.Child("dropins").Index(j)
			if d.Name == "" || strings.ContainsAny(d.Name, "/\x00") || d.Name[0] == '.' || !strings.HasSuffix(d.Name, ".conf") {
				w.fail(field.Invalid(dp.Child("name"), short(d.Name), "must be a file name ending in .conf"))
				continue
			}
			if d.Contents == nil {
				continue
			}
			if ferr := w.add(&Entry{Path: unitPath + ".d/" + d.Name, Type: tar.TypeReg, Mode: 0o644, Data: []byte(*d.Contents), origin: dp.Child("name")}); ferr != nil {
				w.fail(ferr)
			}
		}
		switch {
		case enabled && u.Contents != nil:
			enableLater = append(enableLater, i)
		case enabled:
			// A unit of the base image: its [Install] section is only known
			// inside the image.
			w.Enable = append(w.Enable, u.Name)
		case disabled:
			// With or without contents: the links that enable the unit
			// (the base image's presets, or its own [Install] section) are
			// only known inside the image. The step runs after the layer
			// has put the config's unit file in place, as OpenShift runs
			// `systemctl disable` on the node.
			w.Disable = append(w.Disable, u.Name)
		}
	}
	done := map[string]bool{}
	for _, i := range enableLater {
		w.enableUnit(s, i, up, withContents, done)
	}
	slices.Sort(w.Enable)
	w.Enable = slices.Compact(w.Enable)
	slices.Sort(w.Disable)
	w.Disable = slices.Compact(w.Disable)
}

// enableUnit makes the links `systemctl enable` would make for unit i from
// its [Install] section, so that enabling needs no build step.
func (w *walker) enableUnit(s *ign.Systemd, i int, up *field.Path, withContents map[string]int, done map[string]bool) {
	u := &s.Units[i]
	if done[u.Name] {
		return
	}
	done[u.Name] = true
	p := up.Index(i)
	contents := []string{*u.Contents}
	dropins := slices.Clone(u.Dropins)
	slices.SortFunc(dropins, func(a, b ign.Dropin) int { return strings.Compare(a.Name, b.Name) })
	for _, d := range dropins {
		if d.Contents != nil {
			contents = append(contents, *d.Contents)
		}
	}
	in := parseInstall(contents...)
	target := unitDir + "/" + u.Name
	linkName := u.Name
	wants := len(in.wantedBy)+len(in.requiredBy)+len(in.upheldBy) > 0
	if isTemplate(u.Name) && wants {
		if in.defaultInstance == "" || !validUnitName(instanceOf(u.Name, in.defaultInstance)) {
			w.fail(field.Invalid(p.Child("enabled"), true, "a template unit needs a valid DefaultInstance= in its [Install] section to be enabled"))
			return
		}
		linkName = instanceOf(u.Name, in.defaultInstance)
	}
	link := func(from string) {
		if ferr := w.add(&Entry{Path: from, Type: tar.TypeSymlink, Mode: 0o777, Target: target, origin: p.Child("enabled")}); ferr != nil {
			w.fail(ferr)
		}
	}
	for _, dep := range []struct {
		dir   string
		units []string
	}{{".wants", in.wantedBy}, {".requires", in.requiredBy}, {".upholds", in.upheldBy}} {
		for _, t := range dep.units {
			if !validUnitName(t) {
				w.fail(field.Invalid(p.Child("contents"), t, "[Install] names a unit that is not a valid unit name"))
				continue
			}
			link(unitDir + "/" + t + dep.dir + "/" + linkName)
		}
	}
	for _, a := range in.alias {
		if !validUnitName(a) || unitSuffix(a) != unitSuffix(u.Name) {
			w.fail(field.Invalid(p.Child("contents"), a, "Alias= must be a unit name with the same type suffix as the unit"))
			continue
		}
		link(unitDir + "/" + a)
	}
	for _, also := range in.also {
		if !validUnitName(also) {
			w.fail(field.Invalid(p.Child("contents"), also, "Also= names a unit that is not a valid unit name"))
			continue
		}
		if j, ok := withContents[also]; ok {
			w.enableUnit(s, j, up, withContents, done)
		} else {
			w.Enable = append(w.Enable, also)
		}
	}
}

func (w *walker) passwd(pw *ign.Passwd) {
	pp := w.path.Child("passwd")
	const why = "creating or changing users and groups is not supported: an image must not carry password hashes, and /etc/passwd is merged per machine; create users with a sysusers.d file in storage.files or in the MachineOSConfig's containerFile"
	for i := range pw.Groups {
		w.fail(field.Forbidden(pp.Child("groups").Index(i), why))
	}
	names := map[string]bool{}
	for i := range pw.Users {
		u := &pw.Users[i]
		p := pp.Child("users").Index(i)
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"passwordHash", u.PasswordHash != nil}, {"uid", u.UID != nil}, {"gecos", u.Gecos != nil},
			{"homeDir", u.HomeDir != nil}, {"noCreateHome", u.NoCreateHome != nil}, {"primaryGroup", u.PrimaryGroup != nil},
			{"groups", len(u.Groups) > 0}, {"noUserGroup", u.NoUserGroup != nil}, {"noLogInit", u.NoLogInit != nil},
			{"shell", u.Shell != nil}, {"system", u.System != nil}, {"shouldExist", u.ShouldExist != nil},
		} {
			if f.set {
				w.fail(field.Forbidden(p.Child(f.name), why))
			}
		}
		switch {
		case !ownerNamePattern.MatchString(u.Name) || len(u.Name) > 256:
			w.fail(field.Invalid(p.Child("name"), short(u.Name), "must be a user name"))
			continue
		case names[u.Name]:
			w.fail(field.Duplicate(p.Child("name"), u.Name))
			continue
		}
		names[u.Name] = true
		var keys []string
		for j, k := range u.SSHAuthorizedKeys {
			key := strings.TrimSpace(string(k))
			if key == "" || strings.IndexFunc(key, unicode.IsControl) >= 0 {
				w.fail(field.Invalid(p.Child("sshAuthorizedKeys").Index(j), short(string(k)), "must be one non-empty line"))
				continue
			}
			keys = append(keys, key)
		}
		if len(keys) > 0 {
			w.NodeItems = append(w.NodeItems, NodeItem{Kind: NodeSSHAuthorizedKeys, UserName: u.Name, SSHAuthorizedKeys: keys})
		}
	}
}

func (w *walker) kernelArguments(k *ign.KernelArguments) {
	kp := w.path.Child("kernelArguments")
	have := map[string]bool{}
	for _, a := range w.KernelArguments {
		have[a] = true
	}
	for i, a := range k.ShouldExist {
		if msg := checkArg(string(a)); msg != "" {
			w.fail(field.Invalid(kp.Child("shouldExist").Index(i), short(string(a)), msg))
			continue
		}
		if !have[string(a)] {
			have[string(a)] = true
			w.KernelArguments = append(w.KernelArguments, string(a))
			w.kargOrigins = append(w.kargOrigins, kp.Child("shouldExist").Index(i))
		}
	}
	for i := range k.ShouldNotExist {
		w.fail(field.Forbidden(kp.Child("shouldNotExist").Index(i),
			"an image can add kernel arguments but not remove the base image's; remove them with the node's bootloader configuration"))
	}
}

// kargsTOML is the kargs.d file: one TOML array of basic strings.
func kargsTOML(kargs []string) []byte {
	var b strings.Builder
	b.WriteString("# Kernel arguments from the pool's MachineConfigs, written by Strata.\nkargs = [")
	for i, a := range kargs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tomlString(a))
	}
	b.WriteString("]\n")
	return []byte(b.String())
}

// tomlString quotes s as a TOML basic string. Kernel arguments have no
// control characters, so only quote and backslash need escaping.
func tomlString(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + s + `"`
}
