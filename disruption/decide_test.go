package disruption

import (
	"reflect"
	"strings"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// One row per rule written down on the MachineConfiguration kind.
func TestDecide(t *testing.T) {
	policy := Merge(Defaults(), v1alpha1.NodeDisruptionPolicyConfig{
		Files: []v1alpha1.NodeDisruptionPolicyFile{
			file("/etc/chrony.conf", restart("chronyd.service")),
			file("/etc/crio", reload("crio.service")),
			file("/etc/crio/crio.conf.d/99-restart.conf", restart("crio.service")),
			file("/etc/drain.conf", act("Drain")),
			file("/etc/reboot.conf", act("Reboot")),
			file("/etc/soft.conf", act("SoftReboot")),
			file("/etc/none.conf", act("None")),
			file("/etc/daemon.conf", act("DaemonReload"), restart("a.service")),
			file("/usr/lib/foo", restart("foo.service")),
			file("/usr/lib/reboot", act("Reboot")),
			file("/var/lib/app", restart("app.service")),
			file("/var/lib/app/reboot", act("Reboot")),
			file("/etc/systemd/system/foo.service.d", act("None")),
		},
		Units: []v1alpha1.NodeDisruptionPolicyUnit{
			unit("chronyd.service", restart("chronyd.service")),
			unit("quiet.service", act("None")),
			unit("big.service", act("Reboot")),
		},
	})
	sshDrain := Merge(Defaults(), v1alpha1.NodeDisruptionPolicyConfig{SSHKey: v1alpha1.NodeDisruptionPolicySSHKey{Actions: acts(act("Drain"))}})
	daemonReload := Action{Type: v1alpha1.DaemonReloadAction}
	rs := func(s string) Action { return Action{Type: v1alpha1.RestartAction, Service: s} }
	rl := func(s string) Action { return Action{Type: v1alpha1.ReloadAction, Service: s} }

	cases := []struct {
		name    string
		changes *Changes
		image   bool // ImageChanged
		soft    bool // SoftRebootCapable
		policy  *v1alpha1.NodeDisruptionPolicyClusterStatus
		want    Decision
		reason  []string // substrings of the reason
	}{
		// Always a full reboot.
		{
			name: "current configuration not known", changes: nil, soft: true,
			want: Decision{Kind: Reboot, Drain: true}, reason: []string{"current configuration is not known"},
		},
		{
			name: "new base or admin stage", changes: &Changes{Files: []string{"/etc/none.conf"}}, image: true, soft: true,
			want: Decision{Kind: Reboot, Drain: true}, reason: []string{"new base image or admin stage"},
		},
		{
			name: "kernel arguments, with a file a policy applies live", soft: true,
			changes: &Changes{Reboot: []string{`kernel arguments ["a"] -> ["b"]`}, Files: []string{"/etc/none.conf"}},
			want:    Decision{Kind: Reboot, Drain: true}, reason: []string{"kernel arguments", "always", "full reboot"},
		},
		{
			name: "kernel type", soft: true, changes: &Changes{Reboot: []string{"kernelType default -> realtime"}},
			want: Decision{Kind: Reboot, Drain: true}, reason: []string{"kernelType default -> realtime"},
		},
		{
			name: "extensions", soft: true, changes: &Changes{Reboot: []string{"extensions [] -> [usbguard]"}},
			want: Decision{Kind: Reboot, Drain: true}, reason: []string{"extensions"},
		},

		// Nothing changed.
		{
			name: "nothing changed", changes: &Changes{},
			want: Decision{Kind: Live}, reason: []string{"did not change"},
		},

		// The configuration layer: the policy.
		{
			name: "file a policy restarts a service for", changes: &Changes{Files: []string{"/etc/chrony.conf"}},
			want: Decision{Kind: Live, Actions: []Action{rs("chronyd.service")}}, reason: []string{"/etc/chrony.conf changed", "Restart chronyd.service"},
		},
		{
			name: "file with policy None", changes: &Changes{Files: []string{"/etc/none.conf"}},
			want: Decision{Kind: Live}, reason: []string{"/etc/none.conf", "None"},
		},
		{
			name: "default policy for the containers policy", changes: &Changes{Files: []string{"/etc/containers/policy.json", "/etc/containers/registries.d/x.yaml"}},
			want: Decision{Kind: Live}, reason: []string{"/etc/containers/policy.json", "and 1 more change"},
		},
		{
			name: "longest prefix wins", changes: &Changes{Files: []string{"/etc/crio/crio.conf.d/99-restart.conf"}},
			want: Decision{Kind: Live, Actions: []Action{rs("crio.service")}},
		},
		{
			name:    "a reload of a service that is also restarted is dropped",
			changes: &Changes{Files: []string{"/etc/crio/crio.conf.d/10-other.conf", "/etc/crio/crio.conf.d/99-restart.conf"}},
			want:    Decision{Kind: Live, Actions: []Action{rs("crio.service")}},
		},
		{
			name: "a reload alone", changes: &Changes{Files: []string{"/etc/crio/crio.conf"}},
			want: Decision{Kind: Live, Actions: []Action{rl("crio.service")}},
		},
		{
			name:    "actions run once each, DaemonReload first",
			changes: &Changes{Files: []string{"/etc/chrony.conf", "/etc/daemon.conf"}, Units: []string{"chronyd.service"}},
			want:    Decision{Kind: Live, Actions: []Action{daemonReload, rs("chronyd.service"), rs("a.service")}},
		},
		{
			name: "Drain drains and applies live", changes: &Changes{Files: []string{"/etc/drain.conf", "/etc/chrony.conf"}},
			want: Decision{Kind: Live, Drain: true, Actions: []Action{rs("chronyd.service")}}, reason: []string{"/etc/drain.conf", "Drain"},
		},
		{
			name: "Reboot is strongest", soft: true, changes: &Changes{Files: []string{"/etc/chrony.conf", "/etc/drain.conf", "/etc/reboot.conf", "/etc/soft.conf"}},
			want: Decision{Kind: Reboot, Drain: true}, reason: []string{"/etc/reboot.conf", "Reboot", "and 3 more changes"},
		},
		{
			name: "SoftReboot beats Drain and live actions", soft: true, changes: &Changes{Files: []string{"/etc/chrony.conf", "/etc/drain.conf", "/etc/soft.conf"}},
			want: Decision{Kind: SoftReboot, Drain: true}, reason: []string{"/etc/soft.conf"},
		},
		{
			name: "SoftReboot where bootc cannot is a full reboot", soft: false, changes: &Changes{Files: []string{"/etc/soft.conf"}},
			want: Decision{Kind: Reboot, Drain: true}, reason: []string{"/etc/soft.conf", "not soft-reboot capable"},
		},
		{
			name: "unit a policy names: its actions after a daemon-reload", changes: &Changes{Units: []string{"chronyd.service"}},
			want: Decision{Kind: Live, Actions: []Action{daemonReload, rs("chronyd.service")}}, reason: []string{"unit chronyd.service changed"},
		},
		{
			name: "unit with policy None still gets a daemon-reload", changes: &Changes{Units: []string{"quiet.service"}},
			want: Decision{Kind: Live, Actions: []Action{daemonReload}},
		},
		{
			name: "unit with policy Reboot", soft: true, changes: &Changes{Units: []string{"big.service"}},
			want: Decision{Kind: Reboot, Drain: true}, reason: []string{"unit big.service"},
		},
		{
			name: "units match by exact name only", soft: true, changes: &Changes{Units: []string{"chronyd.socket"}},
			want: Decision{Kind: SoftReboot, Drain: true}, reason: []string{"unit chronyd.socket changed and no policy names it"},
		},
		{
			name: "a file under the unit directory gets a daemon-reload", changes: &Changes{Files: []string{"/etc/systemd/system/foo.service.d/10-x.conf"}},
			want: Decision{Kind: Live, Actions: []Action{daemonReload}},
		},
		{
			name: "SSH keys: the default None", changes: &Changes{SSHKeys: true},
			want: Decision{Kind: Live}, reason: []string{"SSH keys changed", "None"},
		},
		{
			name: "SSH keys: the user's policy", changes: &Changes{SSHKeys: true}, policy: &sshDrain,
			want: Decision{Kind: Live, Drain: true}, reason: []string{"SSH keys", "Drain"},
		},

		// The default for what no policy names.
		{
			name: "unnamed file, soft reboot capable", soft: true, changes: &Changes{Files: []string{"/etc/chrony.conf", "/etc/motd"}},
			want: Decision{Kind: SoftReboot, Drain: true}, reason: []string{"/etc/motd changed and no policy names it", "soft reboot", "and 1 more change"},
		},
		{
			name: "unnamed file, not soft reboot capable", changes: &Changes{Files: []string{"/etc/motd"}},
			want: Decision{Kind: Reboot, Drain: true}, reason: []string{"/etc/motd", "full reboot", "not soft-reboot capable"},
		},
		{
			name: "an empty policy: every change takes the default", soft: true, changes: &Changes{Files: []string{"/etc/containers/policy.json"}},
			policy: &v1alpha1.NodeDisruptionPolicyClusterStatus{},
			want:   Decision{Kind: SoftReboot, Drain: true},
		},

		// Outside /etc: never live.
		{
			name: "a file under /usr a policy names takes the default", soft: true, changes: &Changes{Files: []string{"/usr/lib/foo/bar"}},
			want: Decision{Kind: SoftReboot, Drain: true}, reason: []string{"/usr/lib/foo/bar changed outside /etc", "soft reboot"},
		},
		{
			name: "a file under /usr, not soft reboot capable", changes: &Changes{Files: []string{"/usr/lib/foo"}},
			want: Decision{Kind: Reboot, Drain: true}, reason: []string{"/usr/lib/foo", "outside /etc"},
		},
		{
			name: "a file under /usr whose policy says Reboot", soft: true, changes: &Changes{Files: []string{"/usr/lib/reboot"}},
			want: Decision{Kind: Reboot, Drain: true}, reason: []string{"policy /usr/lib/reboot: Reboot"},
		},

		// Bound for /var: written by the daemon.
		{
			name: "a /var file no policy names costs nothing", changes: &Changes{NodeFiles: []string{"/var/lib/other/x"}},
			want: Decision{Kind: Live}, reason: []string{"/var/lib/other/x", "the daemon writes it"},
		},
		{
			name: "a /var file a policy names takes it", changes: &Changes{NodeFiles: []string{"/var/lib/app/config"}},
			want: Decision{Kind: Live, Actions: []Action{rs("app.service")}},
		},
		{
			name: "a /var file whose policy says Reboot", soft: true, changes: &Changes{NodeFiles: []string{"/var/lib/app/reboot"}},
			want: Decision{Kind: Reboot, Drain: true},
		},
		{
			name: "the kubelet's pull secret: the default None", changes: &Changes{NodeFiles: []string{"/var/lib/kubelet/config.json"}},
			want: Decision{Kind: Live}, reason: []string{"policy /var/lib/kubelet/config.json: None"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := policy
			if tc.policy != nil {
				p = *tc.policy
			}
			got := Decide(Input{Changes: tc.changes, ImageChanged: tc.image, SoftRebootCapable: tc.soft, Policy: p})
			reason := got.Reason
			got.Reason = ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide = %+v, want %+v (reason %q)", got, tc.want, reason)
			}
			for _, r := range tc.reason {
				if !strings.Contains(reason, r) {
					t.Errorf("reason %q does not say %q", reason, r)
				}
			}
			if reason == "" {
				t.Error("no reason")
			}
		})
	}
}
