package nodeconfig

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	igerrors "github.com/coreos/ignition/v2/config/shared/errors"
	"github.com/coreos/ignition/v2/config/v3_5"
	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/vcontext/report"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var errRefusedWarning = errors.New("ignition warns of something Strata refuses")

// strataRefuses reports whether Strata refuses a config that Ignition's
// Parse accepts with the report rpt: the oracle of FuzzParseCurrentVersion.
func strataRefuses(raw []byte, rpt report.Report) bool {
	var doc any
	_ = json.Unmarshal(raw, &doc)
	return refuseWarnings(rpt, ign.MaxVersion, doc).IsFatal()
}

// checkErrors fails unless errs are want, in order, each given as a prefix
// (the position Ignition adds is left out).
func checkErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), errs.ToAggregate())
	}
	for _, e := range errs {
		// Positions are in the JSON copy of the config, not the user's.
		if strings.Contains(e.Error(), " col ") {
			t.Errorf("error %q gives a position in the JSON copy", e.Error())
		}
	}
	for i, w := range want {
		if got := errs[i].Error(); !strings.HasPrefix(got, w) {
			t.Errorf("error %d = %q\nwant prefix %q", i, got, w)
		}
	}
}

// TestIgnitionWarnings decides each kind of warning Ignition gives: keys it
// does not know are refused, by path, naming the key and the version, with
// the likely fix; so is a hard link's owner, which it ignores; notes that
// change nothing Strata renders are accepted.
func TestIgnitionWarnings(t *testing.T) {
	const unknown = "key unknown to Ignition "
	tests := []struct {
		name string
		raw  string
		want []string
	}{
		{name: "misspelt section", raw: `{"ignition":{"version":"3.4.0"},"storag":{"files":[{"path":"/etc/a"}]}}`,
			want: []string{`spec.config.storag: Invalid value: "storag": ` + unknown + `3.4.0, which would ignore it and its value; did you mean "storage"?`}},
		{name: "misspelt mask", raw: `{"ignition":{"version":"3.2.0"},"systemd":{"units":[{"name":"a.service","msak":true}]}}`,
			want: []string{`spec.config.systemd.units[0].msak: Invalid value: "msak": ` + unknown + `3.2.0, which would ignore it and its value; did you mean "mask"?`}},
		{name: "a key in the wrong case, in a 3.5.0 config", raw: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","Mode":420}]}}`,
			want: []string{`spec.config.storage.files[0].Mode: Invalid value: "Mode": ` + unknown + `3.5.0, which would ignore it and its value; did you mean "mode"?`}},
		{name: "deep in a 3.5.0 config", raw: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","contents":{"sorce":"data:,a"}}]}}`,
			want: []string{`spec.config.storage.files[0].contents.sorce: Invalid value: "sorce": ` + unknown + `3.5.0, which would ignore it and its value; did you mean "source"?`}},
		{name: "no likely fix", raw: `{"ignition":{"version":"3.5.0"},"x-comment":"hello"}`,
			want: []string{`spec.config.x-comment: Invalid value: "x-comment": ` + unknown + `3.5.0, which would ignore it and its value`}},
		{name: "several, in path order", raw: `{"ignition":{"version":"3.5.0"},"zz":1,"aa":2,"storage":{"files":[{"path":"/etc/a","x":1}]}}`,
			want: []string{`spec.config.aa: Invalid value: "aa"`, `spec.config.storage.files[0].x: Invalid value: "x"`, `spec.config.zz: Invalid value: "zz"`}},
		{name: "a key of a later version", raw: `{"ignition":{"version":"3.2.0"},"kernelArguments":{"shouldExist":["quiet"]}}`,
			want: []string{`spec.config.kernelArguments: Invalid value: "kernelArguments": ` + unknown + `3.2.0, which would ignore it and its value; it is part of Ignition 3.3.0 and later: set ignition.version to 3.3.0 or later`}},
		{name: "Ignition 2.x's append", raw: `{"ignition":{"version":"3.1.0","config":{"append":[]}}}`,
			want: []string{`spec.config.ignition.config.append: Invalid value: "append": ` + unknown + `3.1.0, which would ignore it and its value; Ignition 3.x calls it "merge"`}},
		{name: "an unknown key and an invalid value", raw: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"etc/a","mdoe":420}]}}`,
			want: []string{`spec.config.storage.files[0].path: Invalid value: "etc/a": Ignition: path not absolute`, `spec.config.storage.files[0].mdoe: Invalid value: "mdoe"`}},
		{name: "a hard link's owner", raw: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}}],"links":[{"path":"/etc/h","target":"/etc/a","hard":true,"user":{"id":1}}]}}`,
			want: []string{`spec.config.storage.links[0].user.id: Invalid value: 1: a hard link has its target's owner, so Ignition ignores user and group here; set them on the target file and remove them here`}},

		// Accepted.
		{name: "null objects are unset", raw: `{"ignition":{"version":"3.4.0"},"storage":null,"passwd":null,"systemd":{"units":[{"name":"a.service","contents":null}]}}`},
		{name: "a null resource is unset", raw: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","contents":null}]}}`},
		{name: "an enabled unit without [Install]", raw: `{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"a.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n"}]}}`},
		{name: "an enabled instance of a template without [Install]", raw: `{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"b@.service","contents":"[Service]\nExecStart=/bin/true\n"},{"name":"b@x.service","enabled":true}]}}`},
		{name: "special mode bits, which Strata writes", raw: `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/usr/bin/x","mode":2541,"contents":{"source":"data:,x"}}],"directories":[{"path":"/etc/t","mode":1023}]}}`},
		{name: "a plain HTTP proxy for HTTPS, only for remote sources", raw: `{"ignition":{"version":"3.4.0","proxy":{"httpsProxy":"http://proxy.example.com"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rpt, _ := v3_5.ParseCompatibleVersion([]byte(tt.raw))
			if !slices.ContainsFunc(rpt.Entries, func(e report.Entry) bool { return e.Kind == report.Warn }) {
				t.Fatalf("Ignition does not warn: %v", rpt)
			}
			for range 3 { // the order of several keys must not vary
				parseCache.reset()
				checkErrors(t, ValidateMachineConfigSpec(spec(tt.raw), field.NewPath("spec")), tt.want)
			}
		})
	}
}

// TestIgnitionWarningsCorpus: the corpus files with keys Ignition 3 does
// not know (a misspelt storage and mask) are refused by key, and are valid
// once the key is fixed as the error says.
func TestIgnitionWarningsCorpus(t *testing.T) {
	const unknown = "key unknown to Ignition "
	tests := []struct {
		file string
		want []string
		fix  []string // old, new, ... in the config's JSON
	}{
		{file: "11-mco-ignsupport-sshd-masked.yaml",
			want: []string{`spec.config.systemd.units[0].masked: Invalid value: "masked": ` + unknown + `3.2.0, which would ignore it and its value; did you mean "mask"?`},
			fix:  []string{`"masked"`, `"mask"`}},
		{file: "13-mco-ignsupport-ping-script.yaml",
			want: []string{`spec.config.stroage: Invalid value: "stroage": ` + unknown + `3.2.0, which would ignore it and its value; did you mean "storage"?`},
			fix:  []string{`"stroage"`, `"storage"`}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".yaml"), func(t *testing.T) {
			mc := loadMachineConfig(t, "testdata/ignition-corpus/"+tt.file)
			checkErrors(t, ValidateMachineConfigSpec(&mc.Spec, field.NewPath("spec")), tt.want)
			if _, err := ParseIgnition(mc.Spec.Config.Raw); err == nil || !strings.Contains(err.Error(), unknown) {
				t.Errorf("ParseIgnition error %v does not name the key", err)
			}

			fixed := string(mc.Spec.Config.Raw)
			for i := 0; i < len(tt.fix); i += 2 {
				if !strings.Contains(fixed, tt.fix[i]) {
					t.Fatalf("no %s in %s", tt.fix[i], fixed)
				}
				fixed = strings.ReplaceAll(fixed, tt.fix[i], tt.fix[i+1])
			}
			mc.Spec.Config = runtime.RawExtension{Raw: []byte(fixed)}
			// What validates renders (containerfile's FuzzRender holds the
			// renderer to it).
			if errs := ValidateMachineConfigSpec(&mc.Spec, field.NewPath("spec")); len(errs) > 0 {
				t.Errorf("fixed as told, still: %v", errs)
			}
		})
	}
}

// TestIgnition2Leftovers is issue 26.3: the Ignition 2.x keys that
// OpenShift accepts in 3.x configs with a warning, `filesystem: root` and
// an empty networkd, are accepted with a warning naming the field (the
// corpus files that have them among the rows); any other leftover, which
// would lose what it says, is refused.
func TestIgnition2Leftovers(t *testing.T) {
	const fsWarn = `"filesystem: root" is Ignition 2.x; ignored, as OpenShift ignores it: in 3.x every path is on the root filesystem; remove the key`
	const netWarn = `an empty "networkd" is Ignition 2.x; ignored, as OpenShift ignores it; remove the key`
	const unknown = "key unknown to Ignition "
	tests := []struct {
		name, file, raw string
		warnings        []string
		refused         []string
	}{
		{name: "15-cnf-container-mount-namespace", file: "15-cnf-container-mount-namespace.yaml",
			warnings: []string{"spec.config.storage.files[0].filesystem: " + fsWarn, "spec.config.storage.files[1].filesystem: " + fsWarn}},
		{name: "16-cnf-localhost-wa-worker", file: "16-cnf-localhost-wa-worker.yaml",
			warnings: []string{"spec.config.storage.files[0].filesystem: " + fsWarn}},
		{name: "34-agnosticd-scsi-udev", file: "34-agnosticd-scsi-udev.yaml",
			warnings: []string{"spec.config.networkd: " + netWarn, "spec.config.storage.files[0].filesystem: " + fsWarn}},
		{name: "root on a directory and a link", raw: `{"ignition":{"version":"3.2.0"},"storage":{"directories":[{"path":"/etc/d","filesystem":"root"}],"links":[{"path":"/etc/l","target":"/etc/d","filesystem":"root"}]}}`,
			warnings: []string{"spec.config.storage.directories[0].filesystem: " + fsWarn, "spec.config.storage.links[0].filesystem: " + fsWarn}},
		{name: "in a 3.5.0 config", raw: `{"ignition":{"version":"3.5.0"},"networkd":{},"storage":{"files":[{"path":"/etc/a","filesystem":"root"}]}}`,
			warnings: []string{"spec.config.networkd: " + netWarn, "spec.config.storage.files[0].filesystem: " + fsWarn}},

		// Refused: the key says something a 3.x config cannot.
		{name: "another filesystem", raw: `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/a","filesystem":"data"}]}}`,
			refused: []string{`spec.config.storage.files[0].filesystem: Invalid value: "filesystem": ` + unknown + "3.2.0"}},
		{name: "networkd with units", raw: `{"ignition":{"version":"3.2.0"},"networkd":{"units":[{"name":"10-eth0.network","contents":"[Match]\n"}]}}`,
			refused: []string{`spec.config.networkd: Invalid value: "networkd": ` + unknown + "3.2.0"}},
		{name: "networkd that is not an object", raw: `{"ignition":{"version":"3.2.0"},"networkd":[]}`,
			refused: []string{`spec.config.networkd: Invalid value: "networkd": ` + unknown + "3.2.0"}},
		{name: "filesystem elsewhere", raw: `{"ignition":{"version":"3.2.0"},"storage":{"filesystem":"root"}}`,
			refused: []string{`spec.config.storage.filesystem: Invalid value: "filesystem": ` + unknown + "3.2.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec(tt.raw)
			if tt.file != "" {
				mc := loadMachineConfig(t, "testdata/ignition-corpus/"+tt.file)
				s = &mc.Spec
			}
			parseCache.reset()
			checkErrors(t, ValidateMachineConfigSpec(s, field.NewPath("spec")), tt.refused)
			if got := Warnings(s, field.NewPath("spec")); !slices.Equal(got, tt.warnings) {
				t.Errorf("warnings:\n%q\nwant:\n%q", got, tt.warnings)
			}
		})
	}
}

// TestParseCurrentVersionWarnings: the shortcut for 3.5.0 configs accepts
// a config only if the full parse would, warnings included.
func TestParseCurrentVersionWarnings(t *testing.T) {
	tests := []struct {
		raw string
		ok  bool
	}{
		{`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","mode":2541}]}}`, true},
		{`{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"a.service","enabled":true,"contents":"[Unit]\n"}]}}`, true},
		{`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","mdoe":420}]}}`, false},
		{`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","Mode":420}]}}`, false},
		{`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a"}],"links":[{"path":"/etc/h","target":"/etc/a","hard":true,"group":{"id":1}}]}}`, false},
	}
	for _, tt := range tests {
		if _, ok := parseCurrentVersion([]byte(tt.raw)); ok != tt.ok {
			t.Errorf("shortcut ok = %v, want %v for %s", ok, tt.ok, tt.raw)
		}
		_, rpt, err := parseIgnition([]byte(tt.raw))
		if (err == nil) != tt.ok {
			t.Errorf("full parse error %v (%v), want ok=%v for %s", err, rpt, tt.ok, tt.raw)
		}
	}
}

// TestAcceptedNotes keeps the list of accepted notes in step with
// Ignition's messages, which it matches.
func TestAcceptedNotes(t *testing.T) {
	for _, msg := range []string{
		igerrors.NewNoInstallSectionError("a.service").Error(),
		igerrors.NewNoInstallSectionForInstantiableUnitError("b@.service", "b@x.service").Error(),
		igerrors.ErrModeSpecialBits.Error(),
		igerrors.ErrInsecureProxy.Error(),
		igerrors.ErrPartitionsOverwritten.Error(),
		igerrors.ErrFilesystemImplicitWipe.Error(),
	} {
		if !acceptedNote(msg) {
			t.Errorf("%q is not accepted", msg)
		}
	}
	for _, msg := range []string{
		igerrors.ErrHardLinkSpecifiesOwner.Error(),
		"unused key x",
		`unit "" is enabled, but has no install section so enable does nothing, and more`,
		"a warning from a later Ignition",
	} {
		if acceptedNote(msg) {
			t.Errorf("%q is accepted", msg)
		}
	}
}

func TestClosestKey(t *testing.T) {
	keys := keysOf(configTypes[3][5])
	for name, want := range map[string]string{
		"storag": "storage", "stroage": "storage", "Storage": "storage", "SYSTEMD": "systemd",
		"paswd": "passwd", "kernelArgs": "", "x": "", "ignitoin": "ignition",
	} {
		if got := closestKey(name, keys); got != want {
			t.Errorf("closestKey(%q) = %q, want %q", name, got, want)
		}
	}
}
