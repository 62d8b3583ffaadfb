package containerfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5"
	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/ignition/v2/config/validate"
	"github.com/coreos/vcontext/report"
	vvalidate "github.com/coreos/vcontext/validate"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ParseIgnition parses an Ignition config of any version from 3.0 to 3.5
// and translates it to 3.5. An empty config (no bytes, only whitespace, or
// JSON null, which is what an unset RawExtension looks like) is an empty 3.5
// config: a MachineConfig may carry only kernel arguments or extensions.
// The error carries Ignition's own report, which names the JSON path, line
// and column of each problem.
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
	var syntax *json.SyntaxError
	if err := json.Unmarshal(raw, new(any)); errors.As(err, &syntax) {
		// Ignition reports JSON syntax errors at line 0 col 0; say where.
		line, col := lineCol(raw, syntax.Offset)
		return ign.Config{}, report.Report{}, fmt.Errorf("JSON syntax error at line %d col %d: %w", line, col, err)
	} else if err != nil {
		return ign.Config{}, report.Report{}, fmt.Errorf("not a JSON object: %w", err)
	}
	cfg, rpt, err := v3_5.ParseCompatibleVersion(raw)
	if err == nil && rpt.IsFatal() {
		// ParseCompatibleVersion reports fatal findings as an error, but do
		// not rely on it: a config with a fatal finding is never used.
		err = errors.New("config is not valid")
	}
	return cfg, rpt, err
}

// parseCurrentVersion is Ignition's own parse of a 3.5.0 config (every
// rendered config is one) with the same validator, minus the work that
// only serves reporting: a second parse of the JSON into a tree of
// positions, and the walk that warns of unknown keys. That work is a
// third of the cost of a large config. It answers ok only for a valid
// config; anything else goes through the full parse, whose report says
// where each problem is.
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
	// other; they are independent, so run them side by side.
	var dups report.Report
	done := make(chan struct{})
	go func() {
		dups = vvalidate.ValidateCustom(cfg, "json", validate.ValidateDups)
		close(done)
	}()
	fields := vvalidate.Validate(cfg, "json")
	<-done
	if fields.IsFatal() || dups.IsFatal() {
		return ign.Config{}, false
	}
	return cfg, true
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
// spec.config.storage.files[0].path rather than $.storage.files.0.path.
func ignitionFieldErrors(fldPath *field.Path, raw []byte, err error, rpt report.Report) field.ErrorList {
	var doc any
	_ = json.Unmarshal(raw, &doc) // only used to show bad values
	var errs field.ErrorList
	for _, e := range rpt.Entries {
		if !e.Kind.IsFatal() {
			continue
		}
		p := fldPath
		value := doc
		for _, elem := range e.Context.Path {
			switch v := elem.(type) {
			case int:
				p = p.Index(v)
				if l, ok := value.([]any); ok && v >= 0 && v < len(l) {
					value = l[v]
				} else {
					value = nil
				}
			default:
				p = p.Child(fmt.Sprint(v))
				if m, ok := value.(map[string]any); ok {
					value = m[fmt.Sprint(v)]
				} else {
					value = nil
				}
			}
		}
		msg := e.Message
		if e.Marker.StartP != nil {
			msg = fmt.Sprintf("%s (%s)", msg, e.Marker.String())
		}
		var bad any = field.OmitValueType{}
		switch v := value.(type) {
		case string:
			bad = short(v)
		case float64, bool:
			bad = v
		}
		errs = append(errs, field.Invalid(p, bad, "Ignition: "+msg))
	}
	if len(errs) == 0 {
		errs = append(errs, field.Invalid(fldPath, field.OmitValueType{}, "Ignition: "+err.Error()))
	}
	return errs
}
