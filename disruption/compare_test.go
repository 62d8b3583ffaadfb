package disruption

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func data(s string) string { return "data:;base64," + base64.StdEncoding.EncodeToString([]byte(s)) }

// ignFile is an Ignition file with contents.
func ignFile(path, contents string, mode int) map[string]any {
	return map[string]any{"path": path, "mode": mode, "contents": map[string]any{"source": data(contents)}}
}

// spec is a MachineConfig spec whose Ignition config has the given
// sections (storage, systemd, passwd, kernelArguments).
func spec(t *testing.T, sections map[string]any) *v1alpha1.MachineConfigSpec {
	t.Helper()
	cfg := map[string]any{"ignition": map[string]any{"version": "3.5.0"}}
	for k, v := range sections {
		cfg[k] = v
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: raw}}
}

func files(f ...map[string]any) map[string]any {
	return map[string]any{"storage": map[string]any{"files": f}}
}

func units(u ...map[string]any) map[string]any {
	return map[string]any{"systemd": map[string]any{"units": u}}
}

const installed = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"

func TestCompare(t *testing.T) {
	with := func(s *v1alpha1.MachineConfigSpec, f func(*v1alpha1.MachineConfigSpec)) *v1alpha1.MachineConfigSpec {
		f(s)
		return s
	}
	cases := []struct {
		name             string
		current, desired func(t *testing.T) *v1alpha1.MachineConfigSpec
		want             Changes
		reboot           []string // substrings of Reboot, in order
		// paths is Paths when it is not want.Files (units' own files).
		paths []string
	}{
		{
			name:    "nil is the empty configuration",
			current: func(*testing.T) *v1alpha1.MachineConfigSpec { return nil },
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec { return spec(t, nil) },
		},
		{
			name:    "same files and units",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec { return spec(t, files(ignFile("/etc/a", "x", 0o644))) },
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec { return spec(t, files(ignFile("/etc/a", "x", 0o644))) },
		},
		{
			name: "content, mode, added and removed files",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, files(ignFile("/etc/a", "x", 0o644), ignFile("/etc/b", "x", 0o644), ignFile("/etc/gone", "x", 0o644), ignFile("/etc/same", "x", 0o644)))
			},
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, files(ignFile("/etc/a", "y", 0o644), ignFile("/etc/b", "x", 0o600), ignFile("/etc/new", "x", 0o644), ignFile("/etc/same", "x", 0o644)))
			},
			want: Changes{Files: []string{"/etc/a", "/etc/b", "/etc/gone", "/etc/new"}},
		},
		{
			name:    "a file under /usr",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec { return spec(t, nil) },
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, files(ignFile("/usr/lib/x", "x", 0o644)))
			},
			want: Changes{Files: []string{"/usr/lib/x"}},
		},
		{
			name: "directories and links",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, map[string]any{"storage": map[string]any{
					"directories": []any{map[string]any{"path": "/etc/d", "mode": 0o755}},
					"links":       []any{map[string]any{"path": "/etc/l", "target": "/etc/a"}},
				}})
			},
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, map[string]any{"storage": map[string]any{
					"directories": []any{map[string]any{"path": "/etc/d", "mode": 0o700}},
					"links":       []any{map[string]any{"path": "/etc/l", "target": "/etc/b"}},
				}})
			},
			want: Changes{Files: []string{"/etc/d", "/etc/l"}},
		},
		{
			name: "an append to the base image's file, and an owner by name",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, files(
					map[string]any{"path": "/etc/hosts", "append": []any{map[string]any{"source": data("a")}}},
					map[string]any{"path": "/etc/o", "contents": map[string]any{"source": data("x")}, "user": map[string]any{"name": "core"}},
				))
			},
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, files(
					map[string]any{"path": "/etc/hosts", "append": []any{map[string]any{"source": data("b")}}},
					map[string]any{"path": "/etc/o", "contents": map[string]any{"source": data("x")}, "user": map[string]any{"name": "admin"}},
				))
			},
			want: Changes{Files: []string{"/etc/hosts", "/etc/o"}},
		},
		{
			name: "files bound for /var are the daemon's",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, files(ignFile("/var/lib/app/a", "x", 0o644), ignFile("/home/core/b", "x", 0o644)))
			},
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, files(ignFile("/var/lib/app/a", "y", 0o644), ignFile("/home/core/b", "x", 0o644)))
			},
			want: Changes{NodeFiles: []string{"/var/lib/app/a"}},
		},
		{
			name: "a unit's contents and enablement: the unit, not its files and links",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, units(map[string]any{"name": "a.service", "contents": installed}))
			},
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, units(map[string]any{"name": "a.service", "contents": installed + "# new\n", "enabled": true}))
			},
			want:  Changes{Units: []string{"a.service"}},
			paths: []string{"/etc/systemd/system/a.service", "/etc/systemd/system/multi-user.target.wants/a.service"},
		},
		{
			name: "drop-ins, mask, added and removed units",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, units(
					map[string]any{"name": "d.service", "dropins": []any{map[string]any{"name": "10-a.conf", "contents": "[Service]\n"}}},
					map[string]any{"name": "m.service"},
					map[string]any{"name": "gone.service", "contents": "[Service]\n"},
				))
			},
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, units(
					map[string]any{"name": "d.service", "dropins": []any{map[string]any{"name": "10-a.conf", "contents": "[Service]\nX=1\n"}}},
					map[string]any{"name": "m.service", "mask": true},
					map[string]any{"name": "new.service", "enabled": false},
				))
			},
			want:  Changes{Units: []string{"d.service", "gone.service", "m.service", "new.service"}},
			paths: []string{"/etc/systemd/system/d.service.d/10-a.conf", "/etc/systemd/system/gone.service", "/etc/systemd/system/m.service"},
		},
		{
			name: "drop-ins in another order change nothing",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, units(map[string]any{"name": "d.service", "dropins": []any{
					map[string]any{"name": "10-a.conf", "contents": "a"}, map[string]any{"name": "20-b.conf", "contents": "b"}}}))
			},
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, units(map[string]any{"name": "d.service", "dropins": []any{
					map[string]any{"name": "20-b.conf", "contents": "b"}, map[string]any{"name": "10-a.conf", "contents": "a"}}}))
			},
		},
		{
			name:    "a unit written as a storage file is a file",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec { return spec(t, nil) },
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, files(ignFile("/etc/systemd/system/f.service", "[Service]\n", 0o644)))
			},
			want: Changes{Files: []string{"/etc/systemd/system/f.service"}},
		},
		{
			name: "SSH keys",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, map[string]any{"passwd": map[string]any{"users": []any{map[string]any{"name": "core", "sshAuthorizedKeys": []any{"ssh-ed25519 AAAA a"}}}}})
			},
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, map[string]any{"passwd": map[string]any{"users": []any{map[string]any{"name": "core", "sshAuthorizedKeys": []any{"ssh-ed25519 BBBB b"}}}}})
			},
			want: Changes{SSHKeys: true},
		},
		{
			name:    "kernel arguments, in spec and in Ignition",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec { return spec(t, nil) },
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return with(spec(t, map[string]any{"kernelArguments": map[string]any{"shouldExist": []any{"b=2"}}}), func(s *v1alpha1.MachineConfigSpec) {
					s.KernelArguments = []string{"a=1"}
				})
			},
			reboot: []string{"kernel arguments"},
		},
		{
			name: "kernel arguments reordered",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return with(spec(t, nil), func(s *v1alpha1.MachineConfigSpec) { s.KernelArguments = []string{"a=1 b=2"} })
			},
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return with(spec(t, nil), func(s *v1alpha1.MachineConfigSpec) { s.KernelArguments = []string{"b=2", "a=1"} })
			},
			reboot: []string{"kernel arguments"},
		},
		{
			name: "kernel arguments split differently are the same",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return with(spec(t, nil), func(s *v1alpha1.MachineConfigSpec) { s.KernelArguments = []string{"a=1 b=2"} })
			},
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return with(spec(t, nil), func(s *v1alpha1.MachineConfigSpec) { s.KernelArguments = []string{"a=1", "b=2"} })
			},
		},
		{
			name:    "a kernel arguments file of one's own",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec { return spec(t, nil) },
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return spec(t, files(ignFile("/usr/lib/bootc/kargs.d/50-mine.toml", "kargs = [\"x=1\"]\n", 0o644)))
			},
			reboot: []string{"kernel arguments file /usr/lib/bootc/kargs.d/50-mine.toml"},
		},
		{
			name:    "an empty kernelType is the default kernel",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec { return spec(t, nil) },
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return with(spec(t, nil), func(s *v1alpha1.MachineConfigSpec) { s.KernelType = v1alpha1.KernelTypeDefault })
			},
		},
		{
			name:    "osImageURL, kernel type and extensions, in that order",
			current: func(t *testing.T) *v1alpha1.MachineConfigSpec { return spec(t, nil) },
			desired: func(t *testing.T) *v1alpha1.MachineConfigSpec {
				return with(spec(t, nil), func(s *v1alpha1.MachineConfigSpec) {
					s.OSImageURL = "quay.io/fedora/fedora-bootc:42"
					s.KernelType = v1alpha1.KernelTypeRealtime
					s.Extensions = []string{"usbguard"}
				})
			},
			reboot: []string{"osImageURL", "kernelType default -> realtime", "extensions [] -> [usbguard]"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Compare(tc.current(t), tc.desired(t))
			if err != nil {
				t.Fatal(err)
			}
			reboot, paths := got.Reboot, got.Paths
			got.Reboot, got.Paths = nil, nil
			wantPaths := tc.paths
			if wantPaths == nil {
				wantPaths = tc.want.Files
			}
			if len(paths) != len(wantPaths) || (len(paths) > 0 && !reflect.DeepEqual(paths, wantPaths)) {
				t.Errorf("Paths = %q, want %q", paths, wantPaths)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("Compare = %+v, want %+v", *got, tc.want)
			}
			if len(reboot) != len(tc.reboot) {
				t.Fatalf("Reboot = %q, want %d entries like %q", reboot, len(tc.reboot), tc.reboot)
			}
			for i, r := range tc.reboot {
				if !strings.Contains(reboot[i], r) {
					t.Errorf("Reboot[%d] = %q, want it to say %q", i, reboot[i], r)
				}
			}
		})
	}
}

func TestCompareRefusesAnInvalidConfiguration(t *testing.T) {
	bad := &v1alpha1.MachineConfigSpec{KernelArguments: []string{"init=/bin/sh"}}
	if _, err := Compare(bad, nil); err == nil || !strings.Contains(err.Error(), "the current configuration") || !strings.Contains(err.Error(), "spec.kernelArguments[0]") {
		t.Errorf("invalid current: err %v, want it named with its field", err)
	}
	if _, err := Compare(nil, bad); err == nil || !strings.Contains(err.Error(), "the desired configuration") {
		t.Errorf("invalid desired: err %v, want it named", err)
	}
}

// From two rendered configurations to a decision, as the daemon will go:
// a chrony.conf change under OpenShift's documented policy restarts
// chronyd and nothing else; add a kernel argument and the node reboots.
func TestCompareThenDecide(t *testing.T) {
	policy := Merge(Defaults(), v1alpha1.NodeDisruptionPolicyConfig{
		Files: []v1alpha1.NodeDisruptionPolicyFile{file("/etc/chrony.conf", restart("chronyd.service"))},
	})
	current := spec(t, files(ignFile("/etc/chrony.conf", "pool a\n", 0o644)))
	desired := spec(t, files(ignFile("/etc/chrony.conf", "pool b\n", 0o644)))
	c, err := Compare(current, desired)
	if err != nil {
		t.Fatal(err)
	}
	d := Decide(Input{Changes: c, SoftRebootCapable: true, Policy: policy})
	if d.Kind != Live || d.Drain || !reflect.DeepEqual(d.Actions, []Action{{Type: v1alpha1.RestartAction, Service: "chronyd.service"}}) {
		t.Errorf("chrony.conf: %+v, want a live restart of chronyd", d)
	}
	desired.KernelArguments = []string{"mitigations=off"}
	if c, err = Compare(current, desired); err != nil {
		t.Fatal(err)
	}
	if d := Decide(Input{Changes: c, SoftRebootCapable: true, Policy: policy}); d.Kind != Reboot || !strings.Contains(d.Reason, "mitigations=off") {
		t.Errorf("with a kernel argument: %+v, want a full reboot naming it", d)
	}
}
