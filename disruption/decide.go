package disruption

import (
	"fmt"
	"strings"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Kind is how much an update disrupts a node.
type Kind string

const (
	// Live: the new image is staged, the changes are written on the
	// running node and the Actions run; no reboot (a drain only when
	// Decision.Drain says so).
	Live Kind = "Live"
	// SoftReboot: drain, then switch with a soft reboot (userspace
	// restarts, the kernel stays).
	SoftReboot Kind = "SoftReboot"
	// Reboot: drain, then a full reboot into the new image.
	Reboot Kind = "Reboot"
)

// Action is a live action to run after the changes are written.
type Action struct {
	// Type is DaemonReload, Reload or Restart.
	Type v1alpha1.NodeDisruptionPolicyActionType
	// Service is the unit Reload and Restart act on.
	Service string
}

func (a Action) String() string {
	if a.Service == "" {
		return string(a.Type)
	}
	return string(a.Type) + " " + a.Service
}

// Decision is what an update costs a node, and why.
type Decision struct {
	Kind Kind
	// Drain is true when the node is drained first: always for
	// SoftReboot and Reboot, and for Live when a policy asks for Drain.
	Drain bool
	// Actions run in order after a live apply, each once, DaemonReload
	// first; empty for SoftReboot and Reboot, whose reboot supersedes
	// them, as on OpenShift.
	Actions []Action
	// Reason is a sentence naming what decided the kind.
	Reason string
}

// Input is what Decide decides from.
type Input struct {
	// Changes is Compare's result for the node's current and desired
	// rendered configurations; nil when the current one is not known,
	// which takes a full reboot.
	Changes *Changes
	// ImageChanged is true when the desired image differs from the
	// current one below the configuration layer: a new base image or a
	// new admin stage (the daemon reads it from the images' labels).
	ImageChanged bool
	// SoftRebootCapable is bootc's softRebootCapable for the staged
	// deployment.
	SoftRebootCapable bool
	// Policy is the merged policy (the MachineConfiguration's
	// status.nodeDisruptionPolicyStatus.clusterPolicies, or Defaults()
	// when the cluster has none).
	Policy v1alpha1.NodeDisruptionPolicyClusterStatus
}

// level orders what an item needs: the strongest of all changed items
// decides.
type level int

const (
	levelLive level = iota
	levelDrain
	levelSoftReboot
	levelReboot
)

// verdict is what one changed item needs.
type verdict struct {
	level   level
	actions []Action
	// why says what the item is and what decided its level.
	why string
}

// Decide applies the rules written down on the MachineConfiguration kind.
func Decide(in Input) Decision {
	reboot := func(why string) Decision {
		return Decision{Kind: Reboot, Drain: true, Reason: why + ": a full reboot"}
	}
	switch {
	case in.Changes == nil:
		return reboot("the node's current configuration is not known")
	case in.ImageChanged:
		return reboot("the image changed below its configuration layer (a new base image or admin stage)")
	case len(in.Changes.Reboot) > 0:
		return reboot(strings.Join(in.Changes.Reboot, "; ") + " (always)")
	case in.Changes.Empty():
		return Decision{Kind: Live, Reason: "the configuration did not change: applied live"}
	}

	var verdicts []verdict
	for _, p := range in.Changes.Files {
		verdicts = append(verdicts, fileVerdict(in, p))
	}
	for _, p := range in.Changes.NodeFiles {
		verdicts = append(verdicts, nodeFileVerdict(in, p))
	}
	for _, u := range in.Changes.Units {
		verdicts = append(verdicts, unitVerdict(in, u))
	}
	if in.Changes.SSHKeys {
		v := fromActions(in, in.Policy.SSHKey.Actions)
		v.why = "SSH keys changed, policy sshkey: " + actionList(in.Policy.SSHKey.Actions) + v.why
		verdicts = append(verdicts, v)
	}

	top := verdicts[0]
	for _, v := range verdicts[1:] {
		if v.level > top.level {
			top = v
		}
	}
	more := ""
	if n := len(verdicts) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more %s)", n, plural(n, "change", "changes"))
	}
	switch top.level {
	case levelReboot:
		return Decision{Kind: Reboot, Drain: true, Reason: top.why + more}
	case levelSoftReboot:
		return Decision{Kind: SoftReboot, Drain: true, Reason: top.why + more}
	}
	d := Decision{Kind: Live, Drain: top.level == levelDrain, Reason: top.why + more}
	var all []Action
	for _, v := range verdicts {
		all = append(all, v.actions...)
	}
	d.Actions = order(all)
	return d
}

// defaultVerdict is what an item no policy can apply takes.
func defaultVerdict(in Input, what string) verdict {
	if in.SoftRebootCapable {
		return verdict{level: levelSoftReboot, why: what + ": a soft reboot (the default; bootc reports the staged deployment soft-reboot capable)"}
	}
	return verdict{level: levelReboot, why: what + ": a full reboot (the default; bootc reports the staged deployment not soft-reboot capable)"}
}

func fileVerdict(in Input, p string) verdict {
	pol, named := MatchFile(in.Policy.Files, p)
	if !under(p, "/etc") {
		// bootc mounts everything of the image but /etc and /var read
		// only: the change needs the new deployment booted.
		what := p + " changed outside /etc, which cannot be written on a running node"
		if named && hasAction(pol.Actions, v1alpha1.RebootAction) {
			return verdict{level: levelReboot, why: what + ": a full reboot (policy " + pol.Path + ": Reboot)"}
		}
		return defaultVerdict(in, what)
	}
	if !named {
		return defaultVerdict(in, p+" changed and no policy names it")
	}
	v := fromActions(in, pol.Actions)
	if under(p, unitDir) {
		v.actions = append([]Action{{Type: v1alpha1.DaemonReloadAction}}, v.actions...)
	}
	v.why = p + " changed, policy " + pol.Path + ": " + actionList(pol.Actions) + v.why
	return v
}

func nodeFileVerdict(in Input, p string) verdict {
	pol, named := MatchFile(in.Policy.Files, p)
	if !named {
		return verdict{level: levelLive, why: p + " changed; the daemon writes it on the node and no policy names it: applied live"}
	}
	v := fromActions(in, pol.Actions)
	v.why = p + " changed, policy " + pol.Path + ": " + actionList(pol.Actions) + v.why
	return v
}

func unitVerdict(in Input, name string) verdict {
	pol, named := MatchUnit(in.Policy.Units, name)
	if !named {
		return defaultVerdict(in, "unit "+name+" changed and no policy names it")
	}
	v := fromActions(in, pol.Actions)
	// systemd sees a unit written on the running node only after a
	// daemon-reload; order puts it before every other action.
	v.actions = append([]Action{{Type: v1alpha1.DaemonReloadAction}}, v.actions...)
	v.why = "unit " + name + " changed, policy " + string(pol.Name) + ": " + actionList(pol.Actions) + v.why
	return v
}

// fromActions is what a policy's actions need. A SoftReboot where bootc
// cannot soft-reboot is a full reboot.
func fromActions(in Input, actions []v1alpha1.NodeDisruptionPolicyAction) verdict {
	var v verdict
	for _, a := range actions {
		switch a.Type {
		case v1alpha1.RebootAction:
			v.level = max(v.level, levelReboot)
		case v1alpha1.SoftRebootAction:
			if in.SoftRebootCapable {
				v.level = max(v.level, levelSoftReboot)
			} else {
				v.level = max(v.level, levelReboot)
			}
		case v1alpha1.DrainAction:
			v.level = max(v.level, levelDrain)
		case v1alpha1.DaemonReloadAction:
			v.actions = append(v.actions, Action{Type: a.Type})
		case v1alpha1.ReloadAction:
			if a.Reload != nil {
				v.actions = append(v.actions, Action{Type: a.Type, Service: string(a.Reload.ServiceName)})
			}
		case v1alpha1.RestartAction:
			if a.Restart != nil {
				v.actions = append(v.actions, Action{Type: a.Type, Service: string(a.Restart.ServiceName)})
			}
		}
	}
	if v.level == levelReboot && hasAction(actions, v1alpha1.SoftRebootAction) {
		v.why = " (bootc reports the staged deployment not soft-reboot capable)"
	}
	return v
}

// order runs each action once, DaemonReload first, the others in the
// order found; a Reload of a service that is also restarted is dropped,
// since the restart reads its configuration anyway.
func order(actions []Action) []Action {
	restarted := map[string]bool{}
	daemonReload := false
	for _, a := range actions {
		switch a.Type {
		case v1alpha1.RestartAction:
			restarted[a.Service] = true
		case v1alpha1.DaemonReloadAction:
			daemonReload = true
		}
	}
	var out []Action
	if daemonReload {
		out = append(out, Action{Type: v1alpha1.DaemonReloadAction})
	}
	seen := map[Action]bool{}
	for _, a := range actions {
		if a.Type == v1alpha1.DaemonReloadAction || seen[a] ||
			(a.Type == v1alpha1.ReloadAction && restarted[a.Service]) {
			continue
		}
		seen[a] = true
		out = append(out, a)
	}
	return out
}

func hasAction(actions []v1alpha1.NodeDisruptionPolicyAction, t v1alpha1.NodeDisruptionPolicyActionType) bool {
	for _, a := range actions {
		if a.Type == t {
			return true
		}
	}
	return false
}

// actionList prints a policy's actions as a person wrote them.
func actionList(actions []v1alpha1.NodeDisruptionPolicyAction) string {
	if len(actions) == 0 {
		return "None"
	}
	parts := make([]string, 0, len(actions))
	for _, a := range actions {
		s := string(a.Type)
		switch {
		case a.Reload != nil:
			s += " " + string(a.Reload.ServiceName)
		case a.Restart != nil:
			s += " " + string(a.Restart.ServiceName)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
