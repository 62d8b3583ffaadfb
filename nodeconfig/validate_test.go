package nodeconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_5"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func TestParseIgnition(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr string
		files   int
	}{
		{name: "nil is empty 3.5", raw: ""},
		{name: "null is empty 3.5", raw: " null "},
		{name: "3.0", raw: `{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}}]}}`, files: 1},
		{name: "3.1", raw: `{"ignition":{"version":"3.1.0"}}`},
		{name: "3.2", raw: `{"ignition":{"version":"3.2.0"}}`},
		{name: "3.3", raw: `{"ignition":{"version":"3.3.0"}}`},
		{name: "3.4", raw: `{"ignition":{"version":"3.4.0"}}`},
		{name: "3.5", raw: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a"}]}}`, files: 1},
		{name: "2.2 is translated", raw: `{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/a"}]}}`, files: 1},
		{name: "syntax error names the place", raw: `{"ignition":{"version":"3.5.0"},}`, wantErr: "line 1 col 33"},
		{name: "relative path", raw: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"etc/a"}]}}`, wantErr: "$.storage.files.0.path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseIgnition([]byte(tt.raw))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Ignition.Version != "3.5.0" {
				t.Errorf("version = %q, want 3.5.0", cfg.Ignition.Version)
			}
			if len(cfg.Storage.Files) != tt.files {
				t.Errorf("files = %d, want %d", len(cfg.Storage.Files), tt.files)
			}
		})
	}
}

func spec(ignJSON string) *v1alpha1.MachineConfigSpec {
	return &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ignJSON)}}
}

func ign35(body string) string {
	if body == "" {
		return `{"ignition":{"version":"3.5.0"}}`
	}
	return `{"ignition":{"version":"3.5.0"},` + body + `}`
}

func TestValidateMachineConfigSpec(t *testing.T) {
	tests := []struct {
		name string
		spec *v1alpha1.MachineConfigSpec
		// want are the error strings, in order; each must contain the
		// field path and, where there is one, the bad value.
		want []string
	}{
		{name: "empty", spec: &v1alpha1.MachineConfigSpec{}},
		{name: "good files", spec: spec(ign35(`"storage":{"files":[{"path":"/etc/a","mode":384,"contents":{"source":"data:;base64,aGk="}},{"path":"/var/lib/x","contents":{"source":"data:,x"}}]}`))},
		{name: "proc path", spec: spec(ign35(`"storage":{"files":[{"path":"/etc/ok"},{"path":"/etc/ok2"},{"path":"/etc/ok3"},{"path":"/proc/x"}]}`)),
			want: []string{`spec.config.storage.files[3].path: Invalid value: "/proc/x": must not be under /proc`}},
		{name: "rejected prefixes", spec: spec(ign35(`"storage":{"directories":[{"path":"/sys"},{"path":"/dev/x"},{"path":"/run/x"},{"path":"/tmp/x"},{"path":"/boot/x"},{"path":"/sysroot/x"},{"path":"/ostree/x"},{"path":"/usr/etc/x"}]}`)),
			want: []string{"directories[0].path", "directories[1].path", "directories[2].path", "directories[3].path", "directories[4].path", "directories[5].path", "directories[6].path", "directories[7].path"}},
		// /var/run is a link to /run; /var/lib/strata is the daemon's own
		// state. Both are /var, so without a rule of their own the daemon
		// would write there.
		{name: "var run and the daemon's state", spec: spec(ign35(`"storage":{"files":[{"path":"/var/run/x","contents":{"source":"data:,x"}},{"path":"/var/lib/strata/state.json","contents":{"source":"data:,x"}},{"path":"/var/lib/stratax/ok"},{"path":"/var/running/ok"}],"directories":[{"path":"/var/run"},{"path":"/var/lib/strata"}],"links":[{"path":"/var/lib/strata/l","target":"/x"},{"path":"/var/lib/h","target":"/var/lib/strata/state.json","hard":true}]}`)),
			want: []string{
				`spec.config.storage.files[0].path: Invalid value: "/var/run/x": must not be under /var/run: it is a link to /run`,
				`spec.config.storage.files[1].path: Invalid value: "/var/lib/strata/state.json": must not be under /var/lib/strata: it is the Strata daemon's own state on the node`,
				`spec.config.storage.directories[0].path: Invalid value: "/var/run": must not be under /var/run`,
				`spec.config.storage.directories[1].path: Invalid value: "/var/lib/strata": must not be under /var/lib/strata`,
				`spec.config.storage.links[0].path: Invalid value: "/var/lib/strata/l": must not be under /var/lib/strata`,
				`spec.config.storage.links[1].target: Invalid value: "/var/lib/strata/state.json": must not be under /var/lib/strata`,
			}},
		{name: "dotdot", spec: spec(ign35(`"storage":{"links":[{"path":"/etc/../proc/x","target":"/a"}]}`)),
			want: []string{`spec.config.storage.links[0].path: Invalid value: "/etc/../proc/x": Ignition: path is not fully simplified`}},
		{name: "unclean", spec: spec(ign35(`"storage":{"files":[{"path":"/etc//a"}]}`)),
			want: []string{`spec.config.storage.files[0].path: Invalid value: "/etc//a": Ignition: path is not fully simplified`}},
		{name: "remote sources", spec: spec(ign35(`"storage":{"files":[{"path":"/etc/a","contents":{"source":"https://example.com/a"}},{"path":"/etc/b","append":[{"source":"s3://b/k"}]},{"path":"/etc/c","contents":{"source":"tftp://h/c"}},{"path":"/etc/d","contents":{"source":"gs://b/d"}},{"path":"/etc/e","contents":{"source":"http://h/e"}}]}`)),
			want: []string{`spec.config.storage.files[0].contents.source: Invalid value: "https://example.com/a": remote sources (https)`,
				`spec.config.storage.files[1].append[0].source: Invalid value: "s3://b/k": remote sources (s3)`,
				`files[2].contents.source: Invalid value: "tftp://h/c"`, `files[3].contents.source: Invalid value: "gs://b/d"`, `files[4].contents.source: Invalid value: "http://h/e"`}},
		{name: "disk layout", spec: spec(ign35(`"storage":{"disks":[{"device":"/dev/sda"}],"filesystems":[{"device":"/dev/sda1","format":"xfs"}],"raid":[{"name":"md0","level":"raid1","devices":["/dev/sda","/dev/sdb"]}],"luks":[{"name":"x","device":"/dev/sda2"}]}`)),
			want: []string{"spec.config.storage.disks[0]: Forbidden", "spec.config.storage.raid[0]: Forbidden", "spec.config.storage.filesystems[0]: Forbidden", "spec.config.storage.luks[0]: Forbidden"}},
		{name: "kargs", spec: &v1alpha1.MachineConfigSpec{KernelArguments: []string{"ok", "a \"b", "tab\there", "nl\n", ""}},
			want: []string{`spec.kernelArguments[1]: Invalid value: "\"b"`, `spec.kernelArguments[2]`, `spec.kernelArguments[3]`, `spec.kernelArguments[4]`}},
		{name: "ignition kargs", spec: spec(ign35(`"kernelArguments":{"shouldExist":["ok","x y"],"shouldNotExist":["quiet"]}`)),
			want: []string{`spec.config.kernelArguments.shouldExist[1]: Invalid value: "x y"`, "spec.config.kernelArguments.shouldNotExist[0]: Forbidden"}},
		{name: "users", spec: spec(ign35(`"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]},{"name":"bob","passwordHash":"$6$x"}],"groups":[{"name":"g"}]}`)),
			want: []string{"spec.config.passwd.groups[0]: Forbidden", "spec.config.passwd.users[1].passwordHash: Forbidden"}},
		{name: "bad hash", spec: spec(ign35(`"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a","verification":{"hash":"sha256-0000000000000000000000000000000000000000000000000000000000000000"}}}]}`)),
			want: []string{"spec.config.storage.files[0].contents.verification.hash: Invalid value"}},
		{name: "bad gzip", spec: spec(ign35(`"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,notgzip","compression":"gzip"}}]}`)),
			want: []string{"spec.config.storage.files[0].contents.compression"}},
		{name: "masked with contents", spec: spec(ign35(`"systemd":{"units":[{"name":"a.service","mask":true,"contents":"[Unit]"}]}`)),
			want: []string{"spec.config.systemd.units[0].mask: Invalid value: true"}},
		{name: "unit file conflicts with storage file", spec: spec(ign35(`"storage":{"files":[{"path":"/etc/systemd/system/a.service","contents":{"source":"data:,x"}}]},"systemd":{"units":[{"name":"a.service","contents":"[Unit]"}]}`)),
			want: []string{`spec.config.storage.files[0].path: Invalid value: "/etc/systemd/system/a.service": Ignition: path conflicts with systemd unit`}},
		{name: "alias conflicts with another unit", spec: spec(ign35(`"systemd":{"units":[{"name":"b.service","contents":"[Unit]"},{"name":"a.service","enabled":true,"contents":"[Install]\nAlias=b.service\n"}]}`)),
			want: []string{`spec.config.systemd.units[1].enabled: Invalid value: "/etc/systemd/system/b.service": the same path is also written by spec.config.systemd.units[0].name`}},
		{name: "kargs file written by hand", spec: &v1alpha1.MachineConfigSpec{KernelArguments: []string{"a"},
			Config: spec(ign35(`"storage":{"files":[{"path":"/usr/lib/bootc/kargs.d/10-strata.toml","contents":{"source":"data:,x"}}]}`)).Config},
			want: []string{`spec.kernelArguments: Invalid value: "/usr/lib/bootc/kargs.d/10-strata.toml": the same path is also written by spec.config.storage.files[0].path`}},
		{name: "hard link to unknown target", spec: spec(ign35(`"storage":{"links":[{"path":"/etc/h","target":"/etc/nothere","hard":true}]}`)),
			want: []string{`spec.config.storage.links[0].target: Invalid value: "/etc/nothere"`}},
		{name: "template without default instance", spec: spec(ign35(`"systemd":{"units":[{"name":"a@.service","enabled":true,"contents":"[Install]\nWantedBy=multi-user.target\n"}]}`)),
			want: []string{"spec.config.systemd.units[0].enabled: Invalid value: true: a template unit needs"}},
		{name: "remote config merge", spec: spec(ign35(`"ignition":{"version":"3.5.0","config":{"merge":[{"source":"https://x/y"}]}}`)),
			want: []string{"spec.config.ignition.config.merge[0]: Forbidden"}},
		{name: "ignition error mapped to a field path", spec: spec(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"etc/a"}]}}`),
			want: []string{"spec.config.storage.files[0].path: Invalid value"}},
		{name: "extensions and kernel type", spec: &v1alpha1.MachineConfigSpec{Extensions: []string{"usbguard", "bad name", "usbguard"}, KernelType: "fancy"},
			want: []string{`spec.extensions[1]: Unsupported value: "bad name"`, `spec.extensions[2]: Duplicate value: "usbguard"`, `spec.kernelType: Unsupported value: "fancy"`}},
		{name: "owner by name ok, both id and name refused by Ignition", spec: spec(ign35(`"storage":{"files":[{"path":"/etc/a","user":{"name":"core"}},{"path":"/etc/b","user":{"name":"core","id":3}}]}`)),
			want: []string{"spec.config.storage.files[1].user"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateMachineConfigSpec(tt.spec, field.NewPath("spec"))
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tt.want), errs.ToAggregate())
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i].Error(), w)
				}
			}
		})
	}
}

func TestParseCacheIsBounded(t *testing.T) {
	parseCache.reset()
	defer parseCache.reset()
	for i := range parseCacheSize * 2 {
		raw := []byte(fmt.Sprintf(`{"ignition":{"version":"3.5.0"},"kernelArguments":{"shouldExist":["a%d"]}}`, i))
		if errs := ValidateMachineConfigSpec(&v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: raw}}, field.NewPath("spec")); len(errs) > 0 {
			t.Fatal(errs)
		}
	}
	if n := len(parseCache.m); n != parseCacheSize || len(parseCache.order) != n {
		t.Errorf("cache holds %d configs (order %d), want %d", n, len(parseCache.order), parseCacheSize)
	}
	// A cached verdict is the same verdict.
	bad := spec(ign35(`"storage":{"files":[{"path":"/proc/x"}]}`))
	for range 2 {
		if errs := ValidateMachineConfigSpec(bad, field.NewPath("spec")); len(errs) != 1 {
			t.Fatalf("errors = %v", errs)
		}
	}
}

// FuzzParseCurrentVersion checks the shortcut for 3.5.0 configs against
// Ignition's own Parse: the same verdict and the same config.
func FuzzParseCurrentVersion(f *testing.F) {
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a"},{"path":"/etc/a"}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"etc/relative"}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"a.service","dropins":[{"name":"x"}]}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"storage":{"links":[{"path":"/etc/l"}],"files":[{"path":"/etc/l/f"}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.4.0"}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"unknown":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast, ok := parseCurrentVersion(raw)
		full, rpt, err := v3_5.Parse(raw)
		if err == nil && strataRefuses(raw, rpt) {
			err = errRefusedWarning
		}
		if ok != (err == nil) {
			t.Fatalf("shortcut ok=%v, Ignition's Parse error %v", ok, err)
		}
		if ok {
			a, _ := json.Marshal(fast)
			b, _ := json.Marshal(full)
			if !bytes.Equal(a, b) {
				t.Fatalf("configs differ:\n%s\n%s", a, b)
			}
		}
	})
}
