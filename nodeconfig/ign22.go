package nodeconfig

// Ignition 2.x configs (spec 2.0.0 to 2.4.0; OpenShift 4.1 to 4.5 wrote
// 2.2.0, and many MachineConfigs in the wild still do) are parsed and
// validated by Ignition 2.x itself (github.com/coreos/ignition v0.35.0, the
// last release of the 2.x spec), brought up to 2.4 by its own
// translations, and translated to 3.5 here by the rules of OpenShift's
// ign-converter (translate/v24tov31, which the Machine Config Operator
// runs on every 2.x config), with only the root filesystem mapped, as
// there:
//
//   - storage.files on the "root" filesystem keep path, mode, owner and
//     contents. A 2.x file is overwritten unless appended to, so an unset
//     overwrite becomes true; with append: true the contents become the
//     one entry of 3.x's append list and overwrite becomes false; an empty
//     source is an empty file ("data:,"), or nothing to append.
//   - storage.directories and storage.links keep what they have.
//   - systemd.units keep name, contents, mask and drop-ins; enabled wins
//     over the deprecated enable, as in Ignition 2.x.
//   - passwd and the ignition section are translated field by field;
//     Strata's own rules then refuse what they refuse in any config
//     (users other than name and sshAuthorizedKeys, groups, replace,
//     certificate authorities, remote sources), at the same paths.
//
// Refused by name, with what to write instead: files, directories and
// links on any other filesystem, storage.filesystems, disks and raid,
// networkd units (no 3.x counterpart), passwd.users[].create and
// ignition.config.append. Keys a 2.x version does not know are refused as
// in 3.x configs; Ignition 2.x's warnings are decided as in 3.x: its note
// on a missing mode is accepted (the translation leaves the mode unset, so
// 3.x's 0644 or 0755 applies, as on OpenShift).

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/coreos/go-semver/semver"
	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/ignition/v2/config/validate"
	vjson "github.com/coreos/vcontext/json"
	vpath "github.com/coreos/vcontext/path"
	"github.com/coreos/vcontext/report"
	"github.com/coreos/vcontext/tree"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v0errors "github.com/coreos/ignition/config/shared/errors"
	v20 "github.com/coreos/ignition/config/v2_0"
	v20types "github.com/coreos/ignition/config/v2_0/types"
	v21 "github.com/coreos/ignition/config/v2_1"
	v21types "github.com/coreos/ignition/config/v2_1/types"
	v22 "github.com/coreos/ignition/config/v2_2"
	v22types "github.com/coreos/ignition/config/v2_2/types"
	v23 "github.com/coreos/ignition/config/v2_3"
	v23types "github.com/coreos/ignition/config/v2_3/types"
	v24 "github.com/coreos/ignition/config/v2_4"
	v24types "github.com/coreos/ignition/config/v2_4/types"
	v0report "github.com/coreos/ignition/config/validate/report"
)

func init() {
	noInstallSection = append(noInstallSection, splitAround(v0errors.NewNoInstallSectionError("\x00").Error(), `"\x00"`))
	configTypes[2] = map[int64]reflect.Type{
		0: reflect.TypeFor[v20types.Config](), 1: reflect.TypeFor[v21types.Config](), 2: reflect.TypeFor[v22types.Config](),
		3: reflect.TypeFor[v23types.Config](), 4: reflect.TypeFor[v24types.Config](),
	}
}

// parseV2 parses, validates and translates a 2.x config of the given
// version (2.0.0 to 2.4.0, checked by the caller). doc is raw decoded.
func parseV2(raw []byte, doc any, version semver.Version) (ign.Config, report.Report, error) {
	var rpt report.Report
	walkUnknownKeys(doc, configTypes[2][version.Minor], nil, func(p []any, key string) bool {
		rpt.Entries = append(rpt.Entries, report.Entry{
			Kind:    refusal{typ: field.ErrorTypeInvalid, bad: key},
			Context: vpath.New("json", append(slices.Clone(p), tree.Key(key))...),
			Message: unknownKeyMessage(version, p, key),
		})
		return true
	})
	slices.SortFunc(rpt.Entries, func(a, b report.Entry) int { return strings.Compare(a.Context.String(), b.Context.String()) })

	old, v0rpt, err := parseV2Own(raw, version.Minor)
	if err != nil {
		// Ignition 2.x reports positions but no paths.
		for _, e := range v0rpt.Entries {
			if e.Kind == v0report.EntryError {
				rpt.Entries = append(rpt.Entries, v0Entry(fmt.Sprintf("Ignition %s: %s", version, e.Message), e))
			}
		}
		if len(rpt.Entries) == 0 {
			rpt.Entries = append(rpt.Entries, v0Entry(fmt.Sprintf("Ignition %s: %v", version, err), v0report.Entry{}))
		}
		correlate(raw, rpt)
		return ign.Config{}, rpt, err
	}

	t := v2translator{version: version, doc: doc}
	cfg := t.config(&old)
	rpt.Merge(t.rpt)
	// The translation is a 3.5 config like any other: Ignition's 3.5
	// validator sees it, at the translated paths, which are the 2.x paths
	// but for what the translation renames.
	rpt.Merge(refuseWarnings(validate.ValidateWithContext(cfg, nil), version, nil))

	// Ignition 2.x's other warnings: its unknown keys were walked above,
	// with paths; its note on a missing mode is accepted (see above). The
	// rest concern fields that are refused by name (create, filesystems,
	// partitions), so they are only listed when nothing else is refused.
	fatal := rpt.IsFatal()
	for _, e := range v0rpt.Entries {
		switch {
		case e.Kind == v0report.EntryInfo || e.Kind == v0report.EntryError:
		case strings.HasPrefix(e.Message, "Config has unrecognized key: "):
		case e.Message == v0errors.ErrPermissionsUnset.Error() || acceptedNote(e.Message):
		case !fatal:
			rpt.Entries = append(rpt.Entries, v0Entry(fmt.Sprintf("Ignition %s warns: %s; Strata refuses warnings it does not know to be harmless", version, e.Message), e))
		}
	}

	correlate(raw, rpt)
	if rpt.IsFatal() {
		return ign.Config{}, rpt, errors.New("config is not valid")
	}
	return cfg, rpt, nil
}

// parseV2Own is Ignition 2.x's parse of a 2.minor config, translated to
// 2.4 by Ignition's own translations.
func parseV2Own(raw []byte, minor int64) (v24types.Config, v0report.Report, error) {
	switch minor {
	case 0:
		c, r, err := v20.Parse(raw)
		return v24.Translate(v23.Translate(v22.TranslateFromV2_1(v21.TranslateFromV2_0(c)))), r, err
	case 1:
		c, r, err := v21.Parse(raw)
		return v24.Translate(v23.Translate(v22.TranslateFromV2_1(c))), r, err
	case 2:
		c, r, err := v22.Parse(raw)
		return v24.Translate(v23.Translate(c)), r, err
	case 3:
		c, r, err := v23.Parse(raw)
		return v24.Translate(c), r, err
	default:
		return v24.Parse(raw)
	}
}

// v0Entry refuses what an entry of Ignition 2.x's report says, at the
// root: the report has a position (of the end of the value) but no path.
func v0Entry(msg string, e v0report.Entry) report.Entry {
	re := report.Entry{Kind: refusal{typ: field.ErrorTypeInvalid}, Message: msg}
	if e.Line > 0 {
		re.Marker = tree.Marker{StartP: &tree.Pos{Line: int64(e.Line), Column: int64(e.Column)}}
	}
	return re
}

// correlate gives each entry of rpt with a path the position of the
// deepest node of raw on that path, as Ignition 3's reports have.
func correlate(raw []byte, rpt report.Report) {
	if len(rpt.Entries) == 0 {
		return
	}
	root, err := vjson.UnmarshalToContext(raw)
	if err != nil {
		return
	}
	for i, e := range rpt.Entries {
		if e.Context.Len() == 0 && e.Marker.StartP != nil {
			rpt.Entries[i].Context = vpath.New("json", pathAt(root, e.Marker.StartP.Line, e.Marker.StartP.Column)...)
		}
		if e.Context.Len() > 0 && e.Marker.StartP == nil {
			rpt.Entries[i].Marker = deepestMarker(root, e.Context)
		}
	}
}

// pathAt is the path of the deepest node of root whose text holds the
// position (line, col), so that an Ignition 2.x error, which gives only a
// position in the JSON, names a field; nil when only the whole config
// holds it.
func pathAt(root tree.Node, line, col int64) []any {
	holds := func(n tree.Node) bool {
		sl, sc := n.Start()
		el, ec := n.End()
		return sl > 0 && (sl < line || sl == line && sc <= col) && (el > line || el == line && ec >= col)
	}
	var p []any
	for {
		switch n := root.(type) {
		case tree.MapNode:
			next := ""
			for k, c := range n.Children {
				if holds(c) {
					next = k
				}
			}
			if next == "" {
				return p
			}
			p, root = append(p, next), n.Children[next]
		case tree.SliceNode:
			next := -1
			for i, c := range n.Children {
				if holds(c) {
					next = i
				}
			}
			if next < 0 {
				return p
			}
			p, root = append(p, next), n.Children[next]
		default:
			return p
		}
	}
}

// deepestMarker is the position of the deepest node of root on path c.
func deepestMarker(root tree.Node, c vpath.ContextPath) tree.Marker {
	for ; c.Len() > 0; c = c.Pop() {
		if n, err := root.Get(c); err == nil {
			return n.GetMarker()
		}
	}
	return root.GetMarker()
}

// v2translator translates a 2.4 config (Ignition's translation of any 2.x
// config) to 3.5, collecting refusals.
type v2translator struct {
	version semver.Version
	doc     any
	rpt     report.Report
}

func (t *v2translator) refuse(msg string, p ...any) {
	t.rpt.Entries = append(t.rpt.Entries, report.Entry{Kind: refusal{typ: field.ErrorTypeForbidden}, Message: msg, Context: vpath.New("json", p...)})
}

// set reports whether the key at path p is in the config as written:
// Ignition 2.0 and 2.1 have no unset mode or owner, and their translation
// to 2.2 makes 0 of every missing one, which would be mode 0000.
func (t *v2translator) set(p ...any) bool {
	parent, ok := valueAt(t.doc, p[:len(p)-1]).(map[string]any)
	if !ok {
		return false
	}
	_, ok = parent[fmt.Sprint(p[len(p)-1])]
	return ok
}

func (t *v2translator) config(c *v24types.Config) ign.Config {
	out := ign.Config{Ignition: ign.Ignition{Version: ign.MaxVersion.String()}}
	t.ignition(&c.Ignition, &out.Ignition)
	t.storage(&c.Storage, &out.Storage)
	for _, u := range c.Systemd.Units {
		out.Systemd.Units = append(out.Systemd.Units, translateUnit(u))
	}
	for i, u := range c.Networkd.Units {
		t.refuse(fmt.Sprintf("Ignition 3 has no networkd section: write the unit as a file at /etc/systemd/network/%s in storage.files, and each drop-in at /etc/systemd/network/%s.d/NAME", u.Name, u.Name),
			"networkd", "units", i)
	}
	t.passwd(&c.Passwd, &out.Passwd)
	return out
}

func (t *v2translator) ignition(in *v24types.Ignition, out *ign.Ignition) {
	for i := range in.Config.Append {
		t.refuse("the image is built once, offline: Ignition configs cannot fetch or include other configs; put the content of that config in a MachineConfig of the pool",
			"ignition", "config", "append", i)
	}
	if in.Config.Replace != nil {
		out.Config.Replace = translateResource(in.Config.Replace.Source, "", in.Config.Replace.Verification, in.Config.Replace.HTTPHeaders)
	}
	for _, ca := range in.Security.TLS.CertificateAuthorities {
		out.Security.TLS.CertificateAuthorities = append(out.Security.TLS.CertificateAuthorities,
			translateResource(ca.Source, "", ca.Verification, ca.HTTPHeaders))
	}
	out.Timeouts = ign.Timeouts{HTTPResponseHeaders: in.Timeouts.HTTPResponseHeaders, HTTPTotal: in.Timeouts.HTTPTotal}
	out.Proxy = ign.Proxy{HTTPProxy: strP(in.Proxy.HTTPProxy), HTTPSProxy: strP(in.Proxy.HTTPSProxy)}
	for _, n := range in.Proxy.NoProxy {
		out.Proxy.NoProxy = append(out.Proxy.NoProxy, ign.NoProxyItem(n))
	}
}

func (t *v2translator) storage(in *v24types.Storage, out *ign.Storage) {
	const layout = "disk layout cannot be changed by an OS image; set it at installation"
	for i := range in.Disks {
		t.refuse(layout, "storage", "disks", i)
	}
	for i := range in.Raid {
		t.refuse(layout, "storage", "raid", i)
	}
	for i := range in.Filesystems {
		t.refuse(layout+"; in Ignition 3 every path is on the root filesystem, so files need no filesystem entry", "storage", "filesystems", i)
	}
	for i, f := range in.Files {
		p := []any{"storage", "files", i}
		if !t.rootFS(f.Filesystem, p) {
			continue
		}
		overwrite := f.Overwrite
		if f.Append {
			// In 2.x, overwrite is meaningless with append.
			overwrite = boolP(false)
		} else if overwrite == nil {
			overwrite = boolP(true)
		}
		file := ign.File{
			Node: t.node(f.Node, p),
			FileEmbedded1: ign.FileEmbedded1{
				Mode: t.mode(f.Mode, p),
			},
		}
		file.Overwrite = overwrite
		res := translateResource(f.Contents.Source, f.Contents.Compression, f.Contents.Verification, f.Contents.HTTPHeaders)
		switch {
		case f.Append && res.Source != nil:
			file.Append = []ign.Resource{res}
		case f.Append:
			// Nothing to append: the file is only created if missing.
		case res.Source == nil && *overwrite:
			// 2.x writes an empty file; 3.x needs a source to overwrite.
			res.Source = strP("data:,")
			file.Contents = res
		default:
			file.Contents = res
		}
		out.Files = append(out.Files, file)
	}
	for i, d := range in.Directories {
		p := []any{"storage", "directories", i}
		if !t.rootFS(d.Filesystem, p) {
			continue
		}
		dir := ign.Directory{Node: t.node(d.Node, p), DirectoryEmbedded1: ign.DirectoryEmbedded1{Mode: t.mode(d.Mode, p)}}
		dir.Overwrite = d.Overwrite
		out.Directories = append(out.Directories, dir)
	}
	for i, l := range in.Links {
		p := []any{"storage", "links", i}
		if !t.rootFS(l.Filesystem, p) {
			continue
		}
		link := ign.Link{Node: t.node(l.Node, p), LinkEmbedded1: ign.LinkEmbedded1{Target: strP(l.Target)}}
		link.Overwrite = l.Overwrite
		if l.Hard {
			link.Hard = boolP(true)
		}
		out.Links = append(out.Links, link)
	}
}

// rootFS refuses a node on a filesystem other than root: 3.x has no
// filesystem names, and only the root filesystem's mount point is known.
func (t *v2translator) rootFS(fs string, p []any) bool {
	if fs == "root" {
		return true
	}
	t.refuse(`only the "root" filesystem translates to Ignition 3, where every path is on the root filesystem: write the full path as seen on the booted node and use filesystem "root"`,
		append(slices.Clone(p), "filesystem")...)
	return false
}

func (t *v2translator) node(n v24types.Node, p []any) ign.Node {
	out := ign.Node{Path: n.Path}
	if n.User != nil {
		out.User.Name = strP(n.User.Name)
		if t.set(append(slices.Clone(p), "user", "id")...) {
			out.User.ID = n.User.ID
		}
	}
	if n.Group != nil {
		out.Group.Name = strP(n.Group.Name)
		if t.set(append(slices.Clone(p), "group", "id")...) {
			out.Group.ID = n.Group.ID
		}
	}
	return out
}

func (t *v2translator) mode(m *int, p []any) *int {
	if !t.set(append(slices.Clone(p), "mode")...) {
		return nil
	}
	return m
}

func translateUnit(u v24types.Unit) ign.Unit {
	enabled := u.Enabled
	if enabled == nil && u.Enable {
		enabled = boolP(true)
	}
	out := ign.Unit{Name: u.Name, Enabled: enabled, Contents: strP(u.Contents)}
	if u.Mask {
		// 2.x mask: false does nothing; 3.x mask: false unmasks.
		out.Mask = boolP(true)
	}
	for _, d := range u.Dropins {
		out.Dropins = append(out.Dropins, ign.Dropin{Name: d.Name, Contents: strP(d.Contents)})
	}
	return out
}

func (t *v2translator) passwd(in *v24types.Passwd, out *ign.Passwd) {
	for i, u := range in.Users {
		if u.Create != nil {
			t.refuse("creating users is not supported: an image must not carry password hashes, and /etc/passwd is merged per machine; create users with a sysusers.d file in storage.files or in the MachineOSConfig's containerFile",
				"passwd", "users", i, "create")
		}
		user := ign.PasswdUser{
			Name:         u.Name,
			PasswordHash: u.PasswordHash,
			UID:          u.UID,
			Gecos:        strP(u.Gecos),
			HomeDir:      strP(u.HomeDir),
			PrimaryGroup: strP(u.PrimaryGroup),
			Shell:        strP(u.Shell),
		}
		for _, k := range u.SSHAuthorizedKeys {
			user.SSHAuthorizedKeys = append(user.SSHAuthorizedKeys, ign.SSHAuthorizedKey(k))
		}
		for _, g := range u.Groups {
			user.Groups = append(user.Groups, ign.Group(g))
		}
		if u.NoCreateHome {
			user.NoCreateHome = boolP(true)
		}
		if u.NoUserGroup {
			user.NoUserGroup = boolP(true)
		}
		if u.NoLogInit {
			user.NoLogInit = boolP(true)
		}
		if u.System {
			user.System = boolP(true)
		}
		out.Users = append(out.Users, user)
	}
	for _, g := range in.Groups {
		group := ign.PasswdGroup{Name: g.Name, Gid: g.Gid, PasswordHash: strP(g.PasswordHash)}
		if g.System {
			group.System = boolP(true)
		}
		out.Groups = append(out.Groups, group)
	}
}

func translateResource(source, compression string, v v24types.Verification, headers v24types.HTTPHeaders) ign.Resource {
	out := ign.Resource{Source: strP(source), Compression: strP(compression), Verification: ign.Verification{Hash: v.Hash}}
	for _, h := range headers {
		out.HTTPHeaders = append(out.HTTPHeaders, ign.HTTPHeader{Name: h.Name, Value: strP(h.Value)})
	}
	return out
}

// strP is s, or nil for "": 2.x's unset strings.
func strP(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func boolP(b bool) *bool { return &b }
