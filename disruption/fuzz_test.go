package disruption

import (
	"strings"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// FuzzDecide checks what holds whatever changed and whatever the policy
// says: a reboot of either kind drains and runs no live action; a live
// decision runs each action once, DaemonReload only first; a changed
// image file outside /etc is never applied live; a soft reboot is chosen
// only where bootc can do one; and there is always a reason.
func FuzzDecide(f *testing.F) {
	f.Add("/etc/chrony.conf", "/etc/chrony.conf", "chronyd.service", "Restart", "/var/lib/x", false, true, false)
	f.Add("/usr/lib/x", "/usr/lib", "a.service", "None", "", true, true, false)
	f.Add("/etc/a/b", "/etc/a", "b.service", "SoftReboot", "/var/x", true, false, true)
	f.Add("/etc/systemd/system/x.service", "/etc", "x.service", "Drain", "", false, true, true)
	f.Fuzz(func(t *testing.T, changed, policyPath, unitName, actionType, nodeFile string, unitChanged, soft, ssh bool) {
		a := v1alpha1.NodeDisruptionPolicyAction{Type: v1alpha1.NodeDisruptionPolicyActionType(actionType)}
		switch a.Type {
		case v1alpha1.ReloadAction:
			a.Reload = &v1alpha1.NodeDisruptionPolicyService{ServiceName: v1alpha1.NodeDisruptionPolicyServiceName(unitName)}
		case v1alpha1.RestartAction:
			a.Restart = &v1alpha1.NodeDisruptionPolicyService{ServiceName: v1alpha1.NodeDisruptionPolicyServiceName(unitName)}
		}
		actions := []v1alpha1.NodeDisruptionPolicyAction{a, {Type: v1alpha1.DaemonReloadAction}, a}
		pol := Merge(Defaults(), v1alpha1.NodeDisruptionPolicyConfig{
			Files:  []v1alpha1.NodeDisruptionPolicyFile{{Path: policyPath, Actions: actions}},
			Units:  []v1alpha1.NodeDisruptionPolicyUnit{{Name: v1alpha1.NodeDisruptionPolicyServiceName(unitName), Actions: actions}},
			SSHKey: v1alpha1.NodeDisruptionPolicySSHKey{Actions: actions},
		})
		c := &Changes{SSHKeys: ssh}
		if strings.HasPrefix(changed, "/") {
			c.Files = []string{changed}
		}
		if strings.HasPrefix(nodeFile, "/") {
			c.NodeFiles = []string{nodeFile}
		}
		if unitChanged {
			c.Units = []string{unitName}
		}
		d := Decide(Input{Changes: c, SoftRebootCapable: soft, Policy: pol})
		if d.Reason == "" {
			t.Error("no reason")
		}
		switch d.Kind {
		case Reboot, SoftReboot:
			if !d.Drain || len(d.Actions) > 0 {
				t.Errorf("%s without a drain or with live actions: %+v", d.Kind, d)
			}
			if d.Kind == SoftReboot && !soft {
				t.Errorf("a soft reboot where bootc cannot: %+v", d)
			}
		case Live:
			seen := map[Action]bool{}
			for i, x := range d.Actions {
				if seen[x] {
					t.Errorf("action %s twice: %+v", x, d.Actions)
				}
				seen[x] = true
				if x.Type == v1alpha1.DaemonReloadAction && i != 0 {
					t.Errorf("DaemonReload not first: %+v", d.Actions)
				}
				if x.Type != v1alpha1.DaemonReloadAction && x.Type != v1alpha1.ReloadAction && x.Type != v1alpha1.RestartAction {
					t.Errorf("action %s is not a live action", x)
				}
			}
			for _, p := range c.Files {
				if p != "/etc" && !strings.HasPrefix(p, "/etc/") {
					t.Errorf("%s applied live: %+v", p, d)
				}
			}
		default:
			t.Errorf("kind %q", d.Kind)
		}
	})
}
