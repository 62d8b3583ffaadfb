package disruption

import (
	"reflect"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func reload(s string) v1alpha1.NodeDisruptionPolicyAction {
	return v1alpha1.NodeDisruptionPolicyAction{Type: v1alpha1.ReloadAction, Reload: &v1alpha1.NodeDisruptionPolicyService{ServiceName: v1alpha1.NodeDisruptionPolicyServiceName(s)}}
}

func restart(s string) v1alpha1.NodeDisruptionPolicyAction {
	return v1alpha1.NodeDisruptionPolicyAction{Type: v1alpha1.RestartAction, Restart: &v1alpha1.NodeDisruptionPolicyService{ServiceName: v1alpha1.NodeDisruptionPolicyServiceName(s)}}
}

func act(t v1alpha1.NodeDisruptionPolicyActionType) v1alpha1.NodeDisruptionPolicyAction {
	return v1alpha1.NodeDisruptionPolicyAction{Type: t}
}

func acts(a ...v1alpha1.NodeDisruptionPolicyAction) []v1alpha1.NodeDisruptionPolicyAction { return a }

func file(p string, a ...v1alpha1.NodeDisruptionPolicyAction) v1alpha1.NodeDisruptionPolicyFile {
	return v1alpha1.NodeDisruptionPolicyFile{Path: p, Actions: a}
}

func unit(n string, a ...v1alpha1.NodeDisruptionPolicyAction) v1alpha1.NodeDisruptionPolicyUnit {
	return v1alpha1.NodeDisruptionPolicyUnit{Name: v1alpha1.NodeDisruptionPolicyServiceName(n), Actions: a}
}

func TestMerge(t *testing.T) {
	defaults := v1alpha1.NodeDisruptionPolicyClusterStatus{
		Files:  []v1alpha1.NodeDisruptionPolicyFile{file("/etc/a", act("None")), file("/etc/b", reload("b.service"))},
		Units:  []v1alpha1.NodeDisruptionPolicyUnit{unit("a.service", act("None"))},
		SSHKey: v1alpha1.NodeDisruptionPolicySSHKey{Actions: acts(act("None"))},
	}
	cases := []struct {
		name string
		user v1alpha1.NodeDisruptionPolicyConfig
		want v1alpha1.NodeDisruptionPolicyClusterStatus
	}{
		{
			name: "no user policy: the defaults",
			want: defaults,
		},
		{
			name: "the user's policy for a default's path replaces it in place; others follow in order",
			user: v1alpha1.NodeDisruptionPolicyConfig{
				Files: []v1alpha1.NodeDisruptionPolicyFile{file("/etc/z", act("Drain")), file("/etc/a", restart("a.service")), file("/etc/c", act("Reboot"))},
				Units: []v1alpha1.NodeDisruptionPolicyUnit{unit("b.service", act("Reboot")), unit("a.service", act("SoftReboot"))},
			},
			want: v1alpha1.NodeDisruptionPolicyClusterStatus{
				Files:  []v1alpha1.NodeDisruptionPolicyFile{file("/etc/a", restart("a.service")), file("/etc/b", reload("b.service")), file("/etc/z", act("Drain")), file("/etc/c", act("Reboot"))},
				Units:  []v1alpha1.NodeDisruptionPolicyUnit{unit("a.service", act("SoftReboot")), unit("b.service", act("Reboot"))},
				SSHKey: v1alpha1.NodeDisruptionPolicySSHKey{Actions: acts(act("None"))},
			},
		},
		{
			name: "an SSH key policy with actions replaces the default",
			user: v1alpha1.NodeDisruptionPolicyConfig{SSHKey: v1alpha1.NodeDisruptionPolicySSHKey{Actions: acts(act("Drain"))}},
			want: v1alpha1.NodeDisruptionPolicyClusterStatus{
				Files:  defaults.Files,
				Units:  defaults.Units,
				SSHKey: v1alpha1.NodeDisruptionPolicySSHKey{Actions: acts(act("Drain"))},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := defaults.DeepCopy()
			got := Merge(defaults, tc.user)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Merge:\n got %+v\nwant %+v", got, tc.want)
			}
			if len(got.Files) > 0 {
				got.Files[0].Actions[0].Type = "Changed"
			}
			if !reflect.DeepEqual(*before, defaults) {
				t.Error("changing the merge changed the defaults")
			}
		})
	}
}

func TestDefaultsAreValid(t *testing.T) {
	d := Defaults()
	if len(d.Files) == 0 || len(d.SSHKey.Actions) != 1 || d.SSHKey.Actions[0].Type != v1alpha1.NoneAction {
		t.Fatalf("defaults %+v: want file policies and SSH keys None", d)
	}
	for _, f := range d.Files {
		if f.Path == "" || f.Path[0] != '/' || len(f.Actions) == 0 {
			t.Errorf("default %+v: not an absolute path with actions", f)
		}
		for _, a := range f.Actions {
			// A default must hold on any node: no service a node may lack.
			if a.Reload != nil || a.Restart != nil {
				t.Errorf("default %s names a service: %+v", f.Path, a)
			}
		}
	}
}

func TestMatchFile(t *testing.T) {
	policies := []v1alpha1.NodeDisruptionPolicyFile{
		file("/etc/containers", act("Drain")),
		file("/etc/containers/registries.d/", act("None")),
		file("/etc/containers/policy.json", reload("crio.service")),
		file("/etc/foo", act("Reboot")),
		file("relative", act("None")),
	}
	cases := []struct {
		path string
		want string // the matched policy's path, "" for none
	}{
		{"/etc/containers/policy.json", "/etc/containers/policy.json"},
		{"/etc/containers/registries.d/x.yaml", "/etc/containers/registries.d/"},
		{"/etc/containers/registries.d", "/etc/containers/registries.d/"},
		{"/etc/containers/storage.conf", "/etc/containers"},
		{"/etc/containers", "/etc/containers"},
		{"/etc/foobar", ""},
		{"/etc/fo", ""},
		{"/etc/foo/bar/baz", "/etc/foo"},
		{"/relative", ""},
		{"/usr/etc/foo", ""},
	}
	for _, tc := range cases {
		got, ok := MatchFile(policies, tc.path)
		if (tc.want != "") != ok || got.Path != tc.want {
			t.Errorf("MatchFile(%s) = %q, %v; want %q", tc.path, got.Path, ok, tc.want)
		}
	}
	if got, ok := MatchFile([]v1alpha1.NodeDisruptionPolicyFile{file("/", act("Drain"))}, "/etc/x"); !ok || got.Path != "/" {
		t.Errorf("policy / does not name /etc/x: %q %v", got.Path, ok)
	}
}

func TestMatchUnit(t *testing.T) {
	policies := []v1alpha1.NodeDisruptionPolicyUnit{unit("chronyd.service", act("None")), unit("foo@.service", act("Drain"))}
	for name, want := range map[string]bool{"chronyd.service": true, "chronyd": false, "chronyd.socket": false, "foo@.service": true, "foo@bar.service": false} {
		if _, ok := MatchUnit(policies, name); ok != want {
			t.Errorf("MatchUnit(%s) = %v, want %v", name, ok, want)
		}
	}
}
