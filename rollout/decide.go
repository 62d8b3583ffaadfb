package rollout

import (
	"time"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/disruption"
	"github.com/strata-dev/strata/internal/imageref"
	"github.com/strata-dev/strata/rollout/bootc"
)

// action is one step of the daemon's state machine: what decide asks a
// sync to do next. doc.go has the table of them. Some only read an input
// that decide needs and that costs something to get (the rendered config,
// the health check); the others change the world.
type action string

const (
	// actIdle: no desired image; report Done.
	actIdle action = "idle"
	// actReadConfig reads the desired rendered config, to know whether
	// the node can apply it.
	actReadConfig action = "readConfig"
	// actReject records an update the node cannot apply (an image not
	// pinned by digest, a rendered config with content the node cannot
	// write) as failed, without a switch, a drain or a reboot.
	actReject action = "reject"
	// actApplyConfig writes the node items of a config for the image the
	// node already runs and records it: no drain, no reboot.
	actApplyConfig action = "applyConfig"
	// actInSync reports Done for the config and image the node runs, and
	// asks for the uncordon of a drain a replaced update asked for.
	actInSync action = "inSync"
	// actDrainFailed: the controller gave up on this update's drain
	// (drainFailure names it): report Degraded with its reason, once the
	// state file records the report (Record.DrainFailed); nothing more
	// for this update until a person removes the verdict. A node an older
	// controller reported Degraded itself is left as it is.
	actDrainFailed action = "drainFailed"
	// actReportWorking reports Working: an image update starts.
	actReportWorking action = "reportWorking"
	// actStage stages the desired image with `bootc switch`, while the
	// workloads still run.
	actStage action = "stage"
	// actUnstage replaces another image staged over the booted one that is
	// desired again (a revert mid-rollout) by the desired one: bootc has
	// no unstage, and the next boot of any kind finalizes what is staged,
	// without a drain. It drops the replaced update's record first.
	actUnstage action = "unstage"
	// actStageAhead downloads the image the controller asked the node to
	// stage ahead (desiredStage) and stages it locked (switch
	// --download-only), while the node runs its desired image and
	// config: no reboot boots it, and the node's update finds it staged.
	actStageAhead action = "stageAhead"
	// actDecide decides what the update costs the node (disruption.Decide
	// over the changes, the image and the policy) once its image is
	// staged, and records it.
	actDecide action = "decide"
	// actDecideAhead decides, as actDecide does, what the update the node
	// holds staged ahead will cost it (desiredStage with
	// desiredStageConfig), and records it: when the node's turn comes
	// the update is decided already, and a Live one without a drain is
	// reported (stagedLive) so that the controller can take the node
	// without counting it against maxUnavailable.
	actDecideAhead action = "decideAhead"
	// actReadPolicy reads the cluster's disruption policy at the turn of
	// an update decided ahead: a policy changed since takes the decision
	// again (actDecide), as the admin's latest word is the one a node
	// follows.
	actReadPolicy action = "readPolicy"
	// actApplyLive applies a Live decision: the node items and the
	// changed /etc paths written live as the staged deployment has them,
	// then the actions; the image stays staged. A failure falls back to
	// a full reboot.
	actApplyLive action = "applyLive"
	// actRequestDrain asks the controller for the drain.
	actRequestDrain action = "requestDrain"
	// actWaitForDrain waits for the controller to apply the drain.
	actWaitForDrain action = "waitForDrain"
	// actWriteItems writes the /var-bound node items, once drained.
	actWriteItems action = "writeItems"
	// actRecordReboot records the update in phase rebooting, with the
	// boot id the reboot is asked from.
	actRecordReboot action = "recordReboot"
	// actReportRebooting reports Rebooting (and, for a rollback, why).
	actReportRebooting action = "reportRebooting"
	// actReboot runs the reboot command; the sync then waits to be killed.
	actReboot action = "reboot"
	// actAdoptBoot records phase verifying for an update whose image
	// booted without its drain and reboot (an unplanned reboot after the
	// stage), so that its health is checked as after a reboot.
	actAdoptBoot action = "adoptBoot"
	// actStartVerify records phase verifying at the first sync after the
	// reboot: the health check timeout counts from then.
	actStartVerify action = "startVerify"
	// actCheckHealth runs the health check of the booted node.
	actCheckHealth action = "checkHealth"
	// actWaitForHealth reports Working while the timeout runs.
	actWaitForHealth action = "waitForHealth"
	// actComplete writes the items again, records the update as the
	// node's current one, reports Done and asks for the uncordon.
	actComplete action = "complete"
	// actFailDidNotBoot records as failed an update whose image did not
	// boot: the node runs another one, and a rollback would select the
	// failed image.
	actFailDidNotBoot action = "failDidNotBoot"
	// actRecordRollback records phase rollingBack: the node was not
	// healthy within the timeout.
	actRecordRollback action = "recordRollback"
	// actRollback runs `bootc rollback`, once.
	actRollback action = "rollback"
	// actFailRolledBack records the update as failed once the node booted
	// again after its rollback.
	actFailRolledBack action = "failRolledBack"
	// actReportFailed reports Degraded with the failed update's reason and
	// asks for the uncordon: the node runs its old image and is healthy.
	actReportFailed action = "reportFailed"
)

// ends says whether the sync stops after the action: it waits for the
// world (the controller, the reboot, the timeout) or is done until the
// desired annotations change. After any other action the sync decides
// again on what it now observes.
func (a action) ends() bool {
	switch a {
	case actIdle, actInSync, actDrainFailed, actWaitForDrain, actReboot,
		actWaitForHealth, actComplete, actReportFailed:
		return true
	}
	return false
}

// runsNoBootc says whether the action surely runs no bootc command that
// changes bootc's state, so that a status read after it is still
// bootc's (scope.status). An action not listed may: the safe default.
func (a action) runsNoBootc() bool {
	switch a {
	case actIdle, actReadConfig, actReject, actInSync, actDrainFailed, actReportWorking,
		actDecide, actDecideAhead, actReadPolicy, actRequestDrain, actWaitForDrain, actWriteItems,
		actRecordReboot, actReportRebooting, actStartVerify, actCheckHealth, actWaitForHealth,
		actComplete, actFailDidNotBoot, actRecordRollback, actFailRolledBack, actReportFailed:
		return true
	}
	return false
}

// updating says whether the action works on an update, so that an error
// it returns is reported in the reason annotation.
func (a action) updating() bool {
	switch a {
	case actIdle, actInSync, actDrainFailed, actReadConfig, actReject, actReportFailed, actStageAhead, actDecideAhead:
		return false
	}
	return true
}

// configCheck is what reading the desired rendered config found.
type configCheck int

const (
	configUnread configCheck = iota
	configValid
	configInvalid
)

// observed is everything decide looks at besides the state file: the
// node's annotations and Ready condition, bootc's status, the boot id,
// the clock, and what this sync has already read or done.
type observed struct {
	// Image and Config are the desired pair, from the node's annotations.
	Image, Config string
	// State and Reason are the daemon's own reported annotations.
	State, Reason string
	// DesiredDrain is the daemon's drain or uncordon request;
	// LastAppliedDrain is the controller's acknowledgement, and
	// DrainFailed the drain request its verdict in drainFailure names
	// ("" for none).
	DesiredDrain, LastAppliedDrain, DrainFailed string
	// Booted and Staged are the digests of bootc's booted and staged
	// deployments ("" for none); RollbackQueued is set when the next boot
	// is the rollback deployment.
	Booted, Staged string
	RollbackQueued bool
	// StagedLocked: the staged deployment is locked (download-only).
	StagedLocked bool
	// StageAhead is the digest of the image the controller asks the node
	// to stage ahead ("" for none); CanStageAhead says whether this bootc
	// stages locked in one step (switch --download-only), without which
	// the daemon does not stage ahead.
	StageAhead    string
	CanStageAhead bool
	// StagedVerified: bootc fetched the staged image under the node's
	// signature policy. Signs: the pool's images must be verified (the
	// node has a signature policy), so an image staged unverified (staged
	// ahead by an older daemon, or before the pool signed) is staged
	// again, verified, before anything takes it. StageAheadRefused: the
	// policy refused the image of desiredStage.
	StagedVerified, Signs, StageAheadRefused bool
	// StageImage and StageConfig are the update staged ahead, from the
	// desiredStage and desiredStageConfig annotations ("" for none).
	StageImage, StageConfig string
	// BootID identifies the running boot.
	BootID string
	// SoftReboots is systemd's count of soft reboots of this boot, read
	// when the update waits for a soft reboot.
	SoftReboots int
	// Now and HealthCheckTimeout time the health check after a reboot.
	Now                time.Time
	HealthCheckTimeout time.Duration

	// ConfigCheck is what reading the desired rendered config found, once
	// this sync read it (actReadConfig).
	ConfigCheck configCheck
	// Health is nil until this sync ran the health check
	// (actCheckHealth), then why the node is unhealthy, "" if it is not.
	Health *string
	// ItemsWritten is set once this sync wrote the node items.
	ItemsWritten bool
	// Policy fingerprints the cluster's disruption policy once this sync
	// read it (actReadPolicy; "" before).
	Policy string
}

// decide is the daemon's state machine: from what the daemon observes and
// its state file, the one next action. It reads nothing else and changes
// nothing; the sync performs the action and asks again.
func decide(o *observed, rec *Record) action {
	if o.Image == "" {
		return actIdle
	}
	key := UpdateKey(o.Image, o.Config)
	want := bootc.DigestOf(o.Image)
	u := rec.Update
	// A verification runs to its verdict: a new desired pair that
	// arrives once the update's reboot happened waits until the update
	// is complete or rolled back, or the health check and the rollback
	// of an image that may not work would be lost.
	if u != nil && u.Key != key && !u.pastReboot(o) {
		u = nil
	}
	// Nodes pull by digest only: with a tag, neither booted nor staged
	// would ever match, and every sync would switch again.
	if u == nil && !imageref.ValidDigest(want) {
		return actReject
	}

	// Past the drain, the state file says where the update is.
	if u != nil {
		switch u.Phase {
		case PhaseFailed:
			return actReportFailed
		case PhaseRebooting:
			if !u.rebooted(o) {
				return reboot(o, u)
			}
			return actStartVerify
		case PhaseVerifying:
			return verify(o, u)
		case PhaseRollingBack:
			if u.BootID != o.BootID {
				return actFailRolledBack
			}
			// `bootc rollback` toggles, so a second one would undo the
			// first.
			if !u.RollbackIssued && !o.RollbackQueued {
				return actRollback
			}
			return reboot(o, u)
		}
	}

	// The image already booted: a config change only, once nothing else
	// is staged for the next boot.
	if want == o.Booted {
		switch {
		case o.Staged != "" && o.Staged != want && !o.lockedAhead():
			// Anything staged but the desired image or a locked stage
			// ahead that is still asked for (one staged unverified where
			// the pool signs is staged ahead again, verified, below:
			// locked, no boot takes it meanwhile).
			return actUnstage
		case rec.CurrentConfig == o.Config && rec.CurrentImage == o.Image:
			if o.StageAhead != "" && o.StageAhead != want && !o.stagedAhead() && o.CanStageAhead && !o.StageAheadRefused {
				return actStageAhead
			}
			if o.stagedAhead() && o.StageConfig != "" && !rec.decided(UpdateKey(o.StageImage, o.StageConfig)) {
				return actDecideAhead
			}
			return actInSync
		case rec.Disruption != nil && rec.Disruption.Key == key && rec.CurrentImage != o.Image:
			// Staged for this update, and booted without its drain and
			// reboot (a reboot someone else asked for): the health gate
			// runs anyway.
			return actAdoptBoot
		case o.ConfigCheck == configUnread:
			return actReadConfig
		case o.ConfigCheck == configInvalid:
			return actReject
		}
		return actApplyConfig
	}

	// An image update, up to its reboot.
	drain := v1alpha1.DrainRequestPrefix + key
	live := rec.decided(key) && rec.Disruption.Kind == disruption.Live
	switch {
	case rec.CurrentConfig == o.Config && rec.CurrentImage == o.Image && o.Staged == want:
		// Applied live: the config runs, the image boots next.
		return actInSync
	case o.DesiredDrain == drain && o.DrainFailed == drain:
		return actDrainFailed
	case o.DesiredDrain == drain && o.State == v1alpha1.NodeStateDegraded && rec.DrainFailed != drain:
		// An older controller's verdict, written as the state itself.
		// The daemon's own report of a verdict a person has removed
		// since is not one: the drain is tried again.
		return actDrainFailed
	case o.ConfigCheck == configUnread:
		return actReadConfig
	case o.ConfigCheck == configInvalid:
		return actReject
	case o.State != v1alpha1.NodeStateWorking || o.Reason != "":
		return actReportWorking
	case o.Staged != want || !o.stagedUsable():
		return actStage
	case !rec.decided(key):
		return actDecide
	case rec.Disruption.Ahead && o.Policy == "":
		return actReadPolicy
	case rec.Disruption.Ahead && o.Policy != rec.Disruption.Policy:
		// Decided ahead under a policy that has changed since.
		return actDecide
	case live && !rec.Disruption.Drain:
		return actApplyLive
	case o.DesiredDrain != drain:
		return actRequestDrain
	case o.LastAppliedDrain != drain:
		return actWaitForDrain
	case live:
		return actApplyLive
	case !o.ItemsWritten:
		return actWriteItems
	}
	return actRecordReboot
}

// decided says whether the record holds the disruption decision of the
// update key, taken from the config and image the node runs now: one
// decided ahead from another current config would compare the wrong
// configs.
func (r *Record) decided(key string) bool {
	d := r.Disruption
	return d != nil && d.Key == key && (d.From == "" || d.From == UpdateKey(r.CurrentImage, r.CurrentConfig))
}

// stagedAhead says whether what is staged is the image asked for ahead,
// locked and, where the pool signs, verified.
func (o *observed) stagedAhead() bool { return o.lockedAhead() && o.stagedUsable() }

// lockedAhead says whether what is staged is the image asked for
// ahead, locked, verified or not.
func (o *observed) lockedAhead() bool { return o.StagedLocked && o.Staged == o.StageAhead }

// stagedUsable says whether the staged image may be booted as it is:
// verified by bootc where the pool signs. At the node's turn a stage
// ahead is only unlocked (--from-downloaded verifies nothing), so an
// unverified one is staged again with the policy enforced.
func (o *observed) stagedUsable() bool { return !o.Signs || o.StagedVerified }

// pastReboot says whether the update's reboot happened (or its rollback
// started), so that it must run to its verdict.
func (u *UpdateRecord) pastReboot(o *observed) bool {
	switch u.Phase {
	case PhaseVerifying, PhaseRollingBack:
		return true
	case PhaseRebooting:
		return u.rebooted(o)
	}
	return false
}

// rebooted says whether the reboot recorded in u happened: another boot
// id, or, for a soft reboot, which keeps the boot id, systemd's count of
// soft reboots above the one recorded before it.
func (u *UpdateRecord) rebooted(o *observed) bool {
	return u.BootID != o.BootID || (u.Soft && o.SoftReboots > u.SoftReboots)
}

// reboot asks for the reboot recorded in u, once Rebooting (and, for a
// rollback, why) is reported.
func reboot(o *observed, u *UpdateRecord) action {
	if o.State != v1alpha1.NodeStateRebooting || (u.Phase == PhaseRollingBack && o.Reason != rollbackReason(u)) {
		return actReportRebooting
	}
	return actReboot
}

// verify checks the node after the update's reboot: the desired digest
// booted and healthy within the timeout completes the update; otherwise
// it is rolled back, once.
func verify(o *observed, u *UpdateRecord) action {
	switch {
	case u.VerifyStarted == nil:
		// Not written by any daemon; start the timeout now rather than
		// never.
		return actStartVerify
	case o.Booted != bootc.DigestOf(u.Image):
		return actFailDidNotBoot
	case o.Health == nil:
		return actCheckHealth
	case *o.Health == "":
		return actComplete
	case o.Now.Before(u.VerifyStarted.Add(o.HealthCheckTimeout)):
		return actWaitForHealth
	}
	return actRecordRollback
}

// rollbackReason is the reason reported while an update rolls back.
func rollbackReason(u *UpdateRecord) string {
	return clip("rolling back: " + u.Failure)
}
