package nodeconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/coreos/go-semver/semver"
	igerrors "github.com/coreos/ignition/v2/config/shared/errors"
	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5"
	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	vpath "github.com/coreos/vcontext/path"
	"github.com/coreos/vcontext/report"
	"github.com/coreos/vcontext/tree"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v30 "github.com/coreos/ignition/v2/config/v3_0/types"
	v31 "github.com/coreos/ignition/v2/config/v3_1/types"
	v32 "github.com/coreos/ignition/v2/config/v3_2/types"
	v33 "github.com/coreos/ignition/v2/config/v3_3/types"
	v34 "github.com/coreos/ignition/v2/config/v3_4/types"
)

// ParseIgnition parses an Ignition config of any version from 3.0 to 3.5,
// or from 2.0 to 2.4 (translated as OpenShift does, see ign22.go), into
// 3.5 types. An empty config (no bytes, only whitespace, or JSON null,
// which is what an unset RawExtension looks like) is an empty 3.5 config:
// a MachineConfig may carry only kernel arguments or extensions. The error
// carries Ignition's own report, which names the JSON path, line and column
// of each problem.
//
// Ignition's warnings are decided here, one kind at a time (see
// refuseWarnings): a key Ignition does not know, which it would ignore
// with its value, is refused, as is any warning not known to be harmless;
// notes that change nothing Strata renders are accepted.
//
// Results are remembered by content (see cache.go): controllers parse the
// same configs on every reconcile. The returned config is shared and must
// not be modified.
func ParseIgnition(raw []byte) (ign.Config, error) {
	cfg, rpt, err := parseIgnitionCached(raw)
	if err != nil {
		return ign.Config{}, ignitionError(err, rpt)
	}
	return cfg, nil
}

func parseIgnition(raw []byte) (ign.Config, report.Report, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return ign.Config{Ignition: ign.Ignition{Version: ign.MaxVersion.String()}}, report.Report{}, nil
	}
	if cfg, ok := parseCurrentVersion(raw); ok {
		return cfg, report.Report{}, nil
	}
	var doc any
	var syntax *json.SyntaxError
	if err := json.Unmarshal(raw, &doc); errors.As(err, &syntax) {
		// Ignition reports JSON syntax errors at line 0 col 0; say where.
		line, col := lineCol(raw, syntax.Offset)
		return ign.Config{}, report.Report{}, fmt.Errorf("JSON syntax error at line %d col %d: %w", line, col, err)
	} else if err != nil {
		return ign.Config{}, report.Report{}, fmt.Errorf("not a JSON object: %w", err)
	}
	version, _, verr := util.GetConfigVersion(raw)
	if verr == nil || errors.Is(verr, igerrors.ErrInvalidVersion) {
		if e, ok := checkVersion(version, verr, doc); !ok {
			return ign.Config{}, report.Report{Entries: []report.Entry{e}}, errors.New("config is not valid")
		}
	}
	if verr == nil && version.Major == 2 {
		return parseV2(raw, doc, version)
	}
	// A config whose version cannot be read at all (say "ignition": 3)
	// goes to Ignition, whose report says where the type is wrong.
	cfg, rpt, err := v3_5.ParseCompatibleVersion(raw)
	rpt = refuseWarnings(rpt, version, doc)
	if err == nil && rpt.IsFatal() {
		// ParseCompatibleVersion reports fatal findings as an error, but do
		// not rely on it: a config with a fatal finding is never used. A
		// refused warning is one too.
		err = errors.New("config is not valid")
	}
	if err != nil {
		return ign.Config{}, rpt, err
	}
	return cfg, rpt, nil
}

// checkVersion refuses, at ignition.version, a version Strata cannot read,
// with the versions it can: Ignition's own "unsupported config version"
// names neither.
func checkVersion(v semver.Version, verr error, doc any) (report.Entry, bool) {
	const can = `Strata reads Ignition 3.0.0 to 3.5.0, and 2.0.0 to 2.4.0 translated to 3.5.0; write "3.5.0" and the 3.5 spec`
	at := vpath.New("json", "ignition", "version")
	if verr != nil {
		if valueAt(doc, at.Path) == nil {
			return report.Entry{Kind: refusal{typ: field.ErrorTypeRequired}, Context: at,
				Message: "an Ignition config needs ignition.version; " + can}, false
		}
		return report.Entry{Kind: refusal{typ: field.ErrorTypeInvalid}, Context: at,
			Message: "not a version such as 3.5.0; " + can}, false
	}
	if v.PreRelease != "" || v.Metadata != "" || v.Patch != 0 ||
		!supportedVersion(v.Major, v.Minor) {
		return report.Entry{Kind: refusal{typ: field.ErrorTypeInvalid}, Context: at,
			Message: "unsupported config version; " + can}, false
	}
	return report.Entry{}, true
}

// parseCurrentVersion is Ignition's own parse of a 3.5.0 config (every
// rendered config is one) with the same validator, minus the work that
// only serves reporting: a second parse of the JSON into a tree of
// positions, and the walk that warns of unknown keys (here only whether
// there is any, over a plain decode, which costs a tenth as much). That
// work is a third of the cost of a large config. It answers ok only for a
// valid config without a warning Strata refuses; anything else goes
// through the full parse, whose report says where each problem is.
func parseCurrentVersion(raw []byte) (ign.Config, bool) {
	version, _, err := util.GetConfigVersion(raw)
	if err != nil || !version.Equal(ign.MaxVersion) {
		return ign.Config{}, false
	}
	var cfg ign.Config
	if _, err := util.HandleParseErrors(raw, &cfg); err != nil {
		return ign.Config{}, false
	}
	// ValidateWithContext(cfg, nil) is these two walks, one after the
	// other (done here as vcontext does them, see walk.go); they are
	// independent, so run them side by side, the shorter one with the
	// check for unknown keys.
	var dups report.Report
	var unknown bool
	done := make(chan struct{})
	go func() {
		dups = validateDups(cfg)
		var doc any
		unknown = json.Unmarshal(raw, &doc) != nil || hasUnknownKey(doc, configTypes[3][5])
		close(done)
	}()
	fields := validateFields(cfg)
	<-done
	if unknown || fields.IsFatal() || dups.IsFatal() {
		return ign.Config{}, false
	}
	for _, e := range slices.Concat(fields.Entries, dups.Entries) {
		if e.Kind == report.Warn && !acceptedNote(e.Message) {
			return ign.Config{}, false
		}
	}
	return cfg, true
}

// refusal is the kind of report entry for what Strata refuses in an
// Ignition config on its own account (a refused warning, a field 2.x
// cannot translate): fatal like report.Error, and turned into a field
// error of type typ that does not claim to quote Ignition. bad, if set, is
// the value shown; otherwise the config's value at the path is.
type refusal struct {
	typ field.ErrorType
	bad any
}

func (refusal) String() string { return "error" }
func (refusal) IsFatal() bool  { return true }

// Warnings that Strata accepts: notes on something that changes nothing
// it renders, or that is refused anyway.
var acceptedNotes = map[string]bool{
	// Strata writes the mode into the layer as given, special bits
	// included; Ignition before spec 3.6 (and OpenShift's daemon) would
	// drop them.
	igerrors.ErrModeSpecialBits.Error(): true,
	// A proxy only serves remote sources, which Strata refuses.
	igerrors.ErrInsecureProxy.Error(): true,
	// Notes on filesystems, which Strata refuses.
	igerrors.ErrPartitionsOverwritten.Error():  true,
	igerrors.ErrFilesystemImplicitWipe.Error(): true,
}

// Enabling a unit without an [Install] section does nothing, as with
// systemctl: the message names the unit, so it is matched around the name.
var noInstallSection = [][2]string{
	splitAround(igerrors.NewNoInstallSectionError("\x00").Error(), `"\x00"`),
	splitAround(igerrors.NewNoInstallSectionForInstantiableUnitError("\x00", "\x00").Error(), `"\x00"`),
}

// supportedVersion: Ignition 3.0 to 3.5, and 2.0 to 2.4, translated.
func supportedVersion(major, minor int64) bool {
	return major == 3 && minor <= 5 || major == 2 && minor <= 4
}

// splitAround cuts msg around the first and last name; the messages it is
// given are Ignition's own, built with name in them.
func splitAround(msg, name string) [2]string {
	before, _, _ := strings.Cut(msg, name)
	return [2]string{before, msg[strings.LastIndex(msg, name)+len(name):]}
}

func acceptedNote(msg string) bool {
	if acceptedNotes[msg] {
		return true
	}
	for _, ps := range noInstallSection {
		if len(msg) > len(ps[0])+len(ps[1]) && strings.HasPrefix(msg, ps[0]) && strings.HasSuffix(msg, ps[1]) {
			return true
		}
	}
	return false
}

// leftover is the kind of report entry for an Ignition 2.x key left in a
// 3.x config that OpenShift accepts with a warning and that holds nothing
// a node would miss (see leftoverNote): not fatal, shown as a warning.
type leftover struct{}

func (leftover) String() string { return "warning" }
func (leftover) IsFatal() bool  { return false }

// leftoverNote is the warning for the key at path p (its last element) of
// a config of the given version when it is an Ignition 2.x leftover that
// is accepted, "" when it is not. Accepted are exactly the two that
// configs converted by hand keep and that hold nothing: `filesystem:
// root` on a file, directory or link (3.x puts every path on the root
// filesystem) and an empty `networkd` (3.x has no such section). Any other
// filesystem, or networkd with units, would lose what it says, and stays
// refused.
func leftoverNote(version semver.Version, p []any, key string, doc any) string {
	if version.Major != 3 || len(p) == 0 {
		return ""
	}
	parent := p[:len(p)-1]
	switch {
	case key == "filesystem" && len(parent) == 3 && parent[0] == "storage" &&
		(parent[1] == "files" || parent[1] == "directories" || parent[1] == "links"):
		if valueAt(doc, p) == "root" {
			return `"filesystem: root" is Ignition 2.x; ignored, as OpenShift ignores it: in 3.x every path is on the root filesystem; remove the key`
		}
	case key == "networkd" && len(parent) == 0:
		if m, ok := valueAt(doc, p).(map[string]any); ok && len(m) == 0 {
			return `an empty "networkd" is Ignition 2.x; ignored, as OpenShift ignores it; remove the key`
		}
	}
	return ""
}

// Warnings that Strata refuses with its own words.
var refusedWarnings = map[string]string{
	igerrors.ErrHardLinkSpecifiesOwner.Error(): "a hard link has its target's owner, so Ignition ignores user and group here; set them on the target file and remove them here",
}

const contextMismatch = "context tree does not match content tree"

// refuseWarnings decides each of Ignition's warnings in rpt, for a config
// of the given version: a key Ignition does not know (it would ignore it
// and everything under it, so the config would render without what the
// user wrote there) becomes a refusal naming the key; so does any warning
// not known to be harmless, since Ignition may grow new ones. Accepted
// notes stay warnings, which nothing refuses. doc is the decoded JSON.
func refuseWarnings(rpt report.Report, version semver.Version, doc any) report.Report {
	out := report.Report{Entries: make([]report.Entry, 0, len(rpt.Entries))}
	for _, e := range rpt.Entries {
		if e.Kind != report.Warn {
			out.Entries = append(out.Entries, e)
			continue
		}
		key, unknown := unusedKey(e)
		switch {
		case unknown && leftoverNote(version, e.Context.Path, key, doc) != "":
			e.Kind = leftover{}
			e.Message = leftoverNote(version, e.Context.Path, key, doc)
		case unknown:
			e.Kind = refusal{typ: field.ErrorTypeInvalid, bad: key}
			e.Message = unknownKeyMessage(version, e.Context.Path[:len(e.Context.Path)-1], key)
		case strings.HasPrefix(e.Message, contextMismatch) && valueAt(doc, e.Context.Path) == nil:
			// An object given as null, which Ignition (and YAML's empty
			// value) treat as unset: there are no keys under it to miss.
		case acceptedNote(e.Message):
		case refusedWarnings[e.Message] != "":
			e.Kind = refusal{typ: field.ErrorTypeInvalid}
			e.Message = refusedWarnings[e.Message]
		default:
			e.Kind = refusal{typ: field.ErrorTypeInvalid}
			e.Message = fmt.Sprintf("Ignition %s warns: %s; Strata refuses warnings it does not know to be harmless", version, e.Message)
		}
		out.Entries = append(out.Entries, e)
	}
	// Ignition reports the unknown keys of an object in map order; sort
	// them, so that the same config always gives the same errors.
	for i := 0; i < len(out.Entries); {
		j := i
		for j < len(out.Entries) && isUnknownKeyRefusal(out.Entries[j]) {
			j++
		}
		slices.SortStableFunc(out.Entries[i:j], func(a, b report.Entry) int { return strings.Compare(a.Context.String(), b.Context.String()) })
		i = j + 1
	}
	return out
}

// unusedKey returns the key of Ignition's unused-key warning.
func unusedKey(e report.Entry) (string, bool) {
	key, ok := strings.CutPrefix(e.Message, "unused key ")
	if !ok || len(e.Context.Path) == 0 {
		return "", false
	}
	last, ok := e.Context.Path[len(e.Context.Path)-1].(tree.Key)
	return key, ok && string(last) == key
}

func isUnknownKeyRefusal(e report.Entry) bool {
	r, ok := e.Kind.(refusal)
	_, key := r.bad.(string)
	return ok && key
}

// unknownKeyMessage says that key, in the object at parent, is unknown to
// Ignition version and so would be ignored, with the likely fix.
func unknownKeyMessage(version semver.Version, parent []any, key string) string {
	return fmt.Sprintf("key unknown to Ignition %s, which would ignore it and its value%s", version, keyHint(version, parent, key))
}

// configTypes are the config types of each Ignition spec version, by major
// and minor, for the unknown-key walk and its hints.
var configTypes = map[int64]map[int64]reflect.Type{
	3: {
		0: reflect.TypeFor[v30.Config](), 1: reflect.TypeFor[v31.Config](), 2: reflect.TypeFor[v32.Config](),
		3: reflect.TypeFor[v33.Config](), 4: reflect.TypeFor[v34.Config](), 5: reflect.TypeFor[ign.Config](),
	},
	// 2: filled in by ign22.go
}

// keyHint is the likely fix for an unknown key: the known key it is
// probably a misspelling of, a later 3.x version that has it, or, for an
// Ignition 2.x key left in a 3.x config, what 3.x has instead.
func keyHint(version semver.Version, parent []any, key string) string {
	if version.Major == 3 {
		if h := v2KeyHint(parent, key); h != "" {
			return "; " + h
		}
	}
	t := typeAt(configTypes[version.Major][version.Minor], parent)
	if t == nil {
		return ""
	}
	if s := closestKey(key, keysOf(t)); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	if version.Major == 3 {
		for m := version.Minor + 1; m <= ign.MaxVersion.Minor; m++ {
			if later := typeAt(configTypes[3][m], parent); later != nil {
				if _, ok := keysOf(later)[key]; ok {
					return fmt.Sprintf("; it is part of Ignition 3.%d.0 and later: set ignition.version to 3.%d.0 or later", m, m)
				}
			}
		}
	}
	return ""
}

// v2KeyHint says what Ignition 3 has instead of a 2.x key, which configs
// converted by hand often keep.
func v2KeyHint(parent []any, key string) string {
	switch {
	case key == "filesystem" && len(parent) == 3 && parent[0] == "storage" &&
		(parent[1] == "files" || parent[1] == "directories" || parent[1] == "links"):
		return `"filesystem" is Ignition 2.x: in 3.x every path is on the root filesystem; remove the key`
	case key == "networkd" && len(parent) == 0:
		return `"networkd" is Ignition 2.x: remove it, and write any networkd units as files under /etc/systemd/network in storage.files`
	case key == "append" && len(parent) == 2 && parent[0] == "ignition" && parent[1] == "config":
		return `Ignition 3.x calls it "merge"`
	}
	return ""
}

// typeAt is the type of the value at path p (object keys and list
// indices) in a config of type t, or nil if t has no such place.
func typeAt(t reflect.Type, p []any) reflect.Type {
	for _, elem := range p {
		if t == nil {
			return nil
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch e := elem.(type) {
		case int:
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
		default:
			t = keysOf(t)[fmt.Sprint(e)]
		}
	}
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

var (
	keySets         sync.Map // reflect.Type -> map[string]reflect.Type
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// keysOf returns the JSON object keys that a struct type decodes, with the
// type of each; nil for anything else, and for types that decode
// themselves (Ignition 2.0's URLs and hashes, which are strings).
func keysOf(t reflect.Type) map[string]reflect.Type {
	if t == nil || t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	if m, ok := keySets.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case f.Anonymous && name == "" && ft.Kind() == reflect.Struct:
			for k, v := range keysOf(ft) {
				m[k] = v
			}
		case !f.IsExported() || name == "-":
		case name == "":
			m[f.Name] = f.Type
		default:
			m[name] = f.Type
		}
	}
	keySets.Store(t, m)
	return m
}

// walkUnknownKeys calls found with the path of each object and each key in
// it that t (the type doc decodes into) has no field for, until found
// returns false. doc is JSON decoded into any. Keys are matched exactly:
// Ignition's decoder would match "Mode" to mode, but its validator warns
// that the key is unknown, and so does this.
func walkUnknownKeys(doc any, t reflect.Type, p []any, found func(p []any, key string) bool) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return true
	}
	switch v := doc.(type) {
	case map[string]any:
		keys := keysOf(t)
		if keys == nil {
			return true
		}
		for k, child := range v {
			ct, ok := keys[k]
			if !ok {
				if !found(p, k) {
					return false
				}
				continue
			}
			if !walkUnknownKeys(child, ct, append(p[:len(p):len(p)], k), found) {
				return false
			}
		}
	case []any:
		if t.Kind() != reflect.Slice {
			return true
		}
		for i, child := range v {
			if !walkUnknownKeys(child, t.Elem(), append(p[:len(p):len(p)], i), found) {
				return false
			}
		}
	}
	return true
}

func hasUnknownKey(doc any, t reflect.Type) bool {
	return !walkUnknownKeys(doc, t, nil, func([]any, string) bool { return false })
}

// closestKey returns the key of keys that name most likely misspells: the
// same but for case, or within two edits (fewer for short names); "" if
// none is close.
func closestKey(name string, keys map[string]reflect.Type) string {
	best, bestDist := "", 0
	for k := range keys {
		if strings.EqualFold(k, name) {
			return k
		}
		d := editDistance(name, k)
		if d > 2 || d*3 > len(name) {
			continue
		}
		if best == "" || d < bestDist || d == bestDist && k < best {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the number of insertions, deletions, substitutions and
// swaps of adjacent letters that turn a into b (optimal string alignment),
// so that "stroage" is one edit from "storage".
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// valueAt is the value at path p in doc (JSON decoded into any), or nil.
func valueAt(doc any, p []any) any {
	for _, elem := range p {
		switch e := elem.(type) {
		case int:
			l, ok := doc.([]any)
			if !ok || e < 0 || e >= len(l) {
				return nil
			}
			doc = l[e]
		default:
			m, ok := doc.(map[string]any)
			if !ok {
				return nil
			}
			doc = m[fmt.Sprint(e)]
		}
	}
	return doc
}

// lineCol turns the offset of a json.SyntaxError (the count of bytes read,
// the bad one included) into the 1-based line and column of the bad byte.
func lineCol(raw []byte, off int64) (int, int) {
	off = min(max(off-1, 0), int64(len(raw)))
	before := raw[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

func ignitionError(err error, rpt report.Report) error {
	var lines []string
	for _, e := range rpt.Entries {
		if e.Kind.IsFatal() {
			lines = append(lines, e.String())
		}
	}
	if len(lines) == 0 {
		return fmt.Errorf("invalid Ignition config: %w", err)
	}
	return fmt.Errorf("invalid Ignition config: %w: %s", err, strings.Join(lines, "; "))
}

// ignitionFieldErrors turns Ignition's report into field errors under
// fldPath (spec.config), so that its findings read like ours:
// spec.config.storage.files[0].path rather than $.storage.files.0.path,
// for Ignition 2.x configs too (their errors give only a position, which
// parseV2 turns into a path).
func ignitionFieldErrors(fldPath *field.Path, raw []byte, err error, rpt report.Report) field.ErrorList {
	var doc any
	_ = json.Unmarshal(raw, &doc) // only used to show bad values
	var errs field.ErrorList
	for _, e := range rpt.Entries {
		if !e.Kind.IsFatal() {
			continue
		}
		p := reportPath(fldPath, e.Context.Path)
		value := valueAt(doc, e.Context.Path)
		// No "line 1 col 148": the position is in the JSON the config was
		// turned into, which the user never sees; the path says where, and
		// a tool that read the user's file can add its line (stratactl).
		msg := e.Message
		var bad any = field.OmitValueType{}
		switch v := value.(type) {
		case string:
			bad = short(v)
		case float64, bool:
			bad = v
		}
		if r, ok := e.Kind.(refusal); ok {
			if r.bad != nil {
				bad = r.bad
			}
			errs = append(errs, &field.Error{Type: r.typ, Field: p.String(), BadValue: bad, Detail: msg})
			continue
		}
		errs = append(errs, field.Invalid(p, bad, "Ignition: "+msg))
	}
	if len(errs) == 0 {
		errs = append(errs, field.Invalid(fldPath, field.OmitValueType{}, "Ignition: "+err.Error()))
	}
	return errs
}
