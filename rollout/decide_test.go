package rollout

import (
	"testing"
	"time"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// TestDecide is the daemon's state machine, one situation a row. The
// desired pair is (A, cfg) unless a row says otherwise; the node booted
// O in boot b1. doc.go draws the same machine.
func TestDecide(t *testing.T) {
	const (
		O, A = original, newImage
		dO   = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		dA   = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
		cfg  = "rendered-1"

		done      = v1alpha1.NodeStateDone
		working   = v1alpha1.NodeStateWorking
		rebooting = v1alpha1.NodeStateRebooting
		degraded  = v1alpha1.NodeStateDegraded
	)
	var (
		key     = UpdateKey(A, cfg)
		drain   = v1alpha1.DrainRequestPrefix + key
		t0      = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		valid   = configValid
		invalid = configInvalid
		healthy = new("")
		sick    = new("unit x failed")
		// An update past its drain, in a phase, recorded from boot b1.
		in = func(p Phase) *Record {
			return &Record{Update: &UpdateRecord{Key: key, Image: A, Config: cfg, Phase: p, BootID: "b1", VerifyStarted: &t0}}
		}
		soft = func(count int) *Record {
			return &Record{Update: &UpdateRecord{Key: key, Image: A, Config: cfg, Phase: PhaseRebooting, BootID: "b1", Soft: true, SoftReboots: count}}
		}
		rolledBackIssued = &Record{Update: &UpdateRecord{Key: key, Image: A, Config: cfg, Phase: PhaseRollingBack, BootID: "b1", RollbackIssued: true}}
		onA              = &Record{CurrentImage: A, CurrentConfig: cfg}
		onO              = &Record{CurrentImage: O, CurrentConfig: cfg}
		none             = &Record{}
		decided          = &Record{Disruption: &DisruptionRecord{Key: key, Kind: "Reboot"}}
		decidedOther     = &Record{Disruption: &DisruptionRecord{Key: UpdateKey(A, "rendered-0"), Kind: "Reboot"}}
		live             = &Record{Disruption: &DisruptionRecord{Key: key, Kind: "Live"}}
		liveDrain        = &Record{Disruption: &DisruptionRecord{Key: key, Kind: "Live", Drain: true}}
		appliedLive      = &Record{CurrentImage: A, CurrentConfig: cfg, Disruption: &DisruptionRecord{Key: key, Kind: "Live"}}
		// Decided, and the controller's verdict on the drain reported.
		reported   = &Record{Disruption: &DisruptionRecord{Key: key, Kind: "Reboot"}, DrainFailed: drain}
		otherDrain = v1alpha1.DrainRequestPrefix + UpdateKey(A, "rendered-0")
		// On O, the update (A, cfg) staged ahead and decided from O.
		from            = UpdateKey(O, cfg)
		decidedAhead    = &Record{CurrentImage: O, CurrentConfig: cfg, Disruption: &DisruptionRecord{Key: key, Kind: "Live", From: from, Ahead: true, Policy: "p1"}}
		decidedAheadOff = &Record{CurrentImage: O, CurrentConfig: "rendered-0", Disruption: &DisruptionRecord{Key: key, Kind: "Live", From: from, Ahead: true}}
	)
	for _, tc := range []struct {
		situation string
		o         observed
		rec       *Record
		want      action
	}{
		{"nothing desired", observed{Booted: dO}, none, actIdle},
		{"desired by tag", observed{Image: repo + ":latest", Booted: dO}, none, actReject},
		{"config change: read it", observed{Image: O, Config: cfg, Booted: dO}, none, actReadConfig},
		{"config change the node cannot apply", observed{Image: O, Config: cfg, Booted: dO, ConfigCheck: invalid}, none, actReject},
		{"config change", observed{Image: O, Config: cfg, Booted: dO, ConfigCheck: valid}, none, actApplyConfig},
		{"config applied", observed{Image: A, Config: cfg, Booted: dA}, onA, actInSync},
		{"asked to stage ahead", observed{Image: O, Config: cfg, Booted: dO, StageAhead: dA, CanStageAhead: true}, onO, actStageAhead},
		{"asked to stage ahead, bootc cannot lock", observed{Image: O, Config: cfg, Booted: dO, StageAhead: dA}, onO, actInSync},
		{"staged ahead, locked", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, StageAhead: dA, CanStageAhead: true}, onO, actInSync},
		{"staged ahead with its config: decide ahead", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, StageAhead: dA, StageImage: A, StageConfig: cfg, CanStageAhead: true}, onO, actDecideAhead},
		{"staged ahead, decided ahead", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, StageAhead: dA, StageImage: A, StageConfig: cfg, CanStageAhead: true}, decidedAhead, actInSync},
		{"staged ahead, decided ahead for another stage config", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, StageAhead: dA, StageImage: A, StageConfig: "rendered-2", CanStageAhead: true}, decidedAhead, actDecideAhead},
		{"the turn of a node decided ahead: read the policy", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, State: working, ConfigCheck: valid}, decidedAhead, actReadPolicy},
		{"the turn of a node decided ahead, same policy: apply live at once", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, State: working, ConfigCheck: valid, Policy: "p1"}, decidedAhead, actApplyLive},
		{"the turn of a node decided ahead, the policy changed: decide again", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, State: working, ConfigCheck: valid, Policy: "p2"}, decidedAhead, actDecide},
		{"decided ahead from another current config: decide again", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, State: working, ConfigCheck: valid}, decidedAheadOff, actDecide},
		{"staged ahead, no longer asked", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true}, onO, actUnstage},
		{"staged ahead unlocked: unstage", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, StageAhead: dA, CanStageAhead: true}, onO, actUnstage},
		{"asked to stage ahead, config not applied yet", observed{Image: O, Config: cfg, Booted: dO, StageAhead: dA, CanStageAhead: true, ConfigCheck: valid}, none, actApplyConfig},
		{"the turn of a node staged ahead: no second stage", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, State: working, ConfigCheck: valid}, none, actDecide},
		{"pool signs: stage ahead, verified", observed{Image: O, Config: cfg, Booted: dO, StageAhead: dA, CanStageAhead: true, Signs: true}, onO, actStageAhead},
		{"pool signs: staged ahead verified", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, StagedVerified: true, StageAhead: dA, CanStageAhead: true, Signs: true}, onO, actInSync},
		{"pool signs: staged ahead unverified, stage ahead again", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, StageAhead: dA, CanStageAhead: true, Signs: true}, onO, actStageAhead},
		{"pool signs: staged ahead unverified, no decision ahead", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, StageAhead: dA, StageImage: A, StageConfig: cfg, Signs: true}, onO, actInSync},
		{"pool signs: the stage ahead was refused", observed{Image: O, Config: cfg, Booted: dO, StageAhead: dA, CanStageAhead: true, Signs: true, StageAheadRefused: true}, onO, actInSync},
		{"pool signs: the turn of a node staged ahead unverified: stage again", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, State: working, ConfigCheck: valid, Signs: true}, decided, actStage},
		{"pool signs: the turn of a node staged ahead verified", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, StagedLocked: true, StagedVerified: true, State: working, ConfigCheck: valid, Signs: true}, none, actDecide},
		{"booted without the drain", observed{Image: A, Config: cfg, Booted: dA, BootID: "b2"}, decided, actAdoptBoot},
		{"booted without the drain, decided for another", observed{Image: A, Config: cfg, Booted: dA, BootID: "b2"}, decidedOther, actReadConfig},
		{"image update: read the config", observed{Image: A, Config: cfg, Booted: dO}, none, actReadConfig},
		{"image update the node cannot apply", observed{Image: A, Config: cfg, Booted: dO, ConfigCheck: invalid}, none, actReject},
		{"image update starts", observed{Image: A, Config: cfg, Booted: dO, State: done, ConfigCheck: valid}, none, actReportWorking},
		{"working, an error reported", observed{Image: A, Config: cfg, Booted: dO, State: working, Reason: "x", ConfigCheck: valid}, none, actReportWorking},
		{"working: stage", observed{Image: A, Config: cfg, Booted: dO, State: working, ConfigCheck: valid}, none, actStage},
		{"staged: decide the disruption", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, ConfigCheck: valid}, none, actDecide},
		{"staged, decided for another update", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, ConfigCheck: valid}, decidedOther, actDecide},
		{"decided live: apply live", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, ConfigCheck: valid}, live, actApplyLive},
		{"decided live with a drain: ask for it", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, ConfigCheck: valid}, liveDrain, actRequestDrain},
		{"decided live with a drain: drained", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, DesiredDrain: drain, LastAppliedDrain: drain, ConfigCheck: valid}, liveDrain, actApplyLive},
		{"applied live, the image staged", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working}, appliedLive, actInSync},
		{"applied live, the staged image gone", observed{Image: A, Config: cfg, Booted: dO, State: done}, appliedLive, actReadConfig},
		{"decided: ask for the drain", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, ConfigCheck: valid}, decided, actRequestDrain},
		{"drain asked", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, DesiredDrain: drain, ConfigCheck: valid}, decided, actWaitForDrain},
		{"drain given up on", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, DesiredDrain: drain, DrainFailed: drain, ConfigCheck: valid}, decided, actDrainFailed},
		{"drain given up on, reported", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: degraded, Reason: "x", DesiredDrain: drain, DrainFailed: drain}, reported, actDrainFailed},
		{"drain timed out (an older controller's Degraded)", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: degraded, DesiredDrain: drain}, none, actDrainFailed},
		{"drain verdict removed: try again", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: degraded, Reason: "x", DesiredDrain: drain, ConfigCheck: valid}, reported, actReportWorking},
		{"drain verdict removed, Working again", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, DesiredDrain: drain, ConfigCheck: valid}, reported, actWaitForDrain},
		{"verdict on a replaced update's drain", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, DesiredDrain: drain, DrainFailed: otherDrain, ConfigCheck: valid}, decided, actWaitForDrain},
		{"verdict on a replaced update's drain, reported", observed{Image: A, Config: cfg, Booted: dO, State: degraded, DesiredDrain: otherDrain, DrainFailed: otherDrain, ConfigCheck: valid}, none, actReportWorking},
		{"drained", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, DesiredDrain: drain, LastAppliedDrain: drain, ConfigCheck: valid}, decided, actWriteItems},
		{"items written", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, DesiredDrain: drain, LastAppliedDrain: drain, ConfigCheck: valid, ItemsWritten: true}, decided, actRecordReboot},
		{"rebooting, not reported", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, BootID: "b1"}, in(PhaseRebooting), actReportRebooting},
		{"rebooting, reported", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: rebooting, BootID: "b1"}, in(PhaseRebooting), actReboot},
		{"soft reboot, not reported", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: working, BootID: "b1", SoftReboots: 2}, soft(2), actReportRebooting},
		{"soft reboot, reported", observed{Image: A, Config: cfg, Booted: dO, Staged: dA, State: rebooting, BootID: "b1", SoftReboots: 2}, soft(2), actReboot},
		{"soft-rebooted: same boot id, count up", observed{Image: A, Config: cfg, Booted: dA, State: rebooting, BootID: "b1", SoftReboots: 3}, soft(2), actStartVerify},
		{"soft-rebooted, changed meanwhile", observed{Image: O, Config: cfg, Booted: dA, BootID: "b1", SoftReboots: 3}, soft(2), actStartVerify},
		{"booted again", observed{Image: A, Config: cfg, Booted: dA, State: rebooting, BootID: "b2"}, in(PhaseRebooting), actStartVerify},
		{"verifying: another image booted", observed{Image: A, Config: cfg, Booted: dO, BootID: "b2"}, in(PhaseVerifying), actFailDidNotBoot},
		{"verifying: check health", observed{Image: A, Config: cfg, Booted: dA, BootID: "b2"}, in(PhaseVerifying), actCheckHealth},
		{"verifying: healthy", observed{Image: A, Config: cfg, Booted: dA, BootID: "b2", Health: healthy}, in(PhaseVerifying), actComplete},
		{"verifying: sick within timeout", observed{Image: A, Config: cfg, Booted: dA, BootID: "b2", Health: sick, Now: t0.Add(time.Minute), HealthCheckTimeout: time.Hour}, in(PhaseVerifying), actWaitForHealth},
		{"verifying: sick past timeout", observed{Image: A, Config: cfg, Booted: dA, BootID: "b2", Health: sick, Now: t0.Add(time.Hour), HealthCheckTimeout: time.Hour}, in(PhaseVerifying), actRecordRollback},
		{"rolling back", observed{Image: A, Config: cfg, Booted: dA, BootID: "b1"}, in(PhaseRollingBack), actRollback},
		{"rolling back, queued by another", observed{Image: A, Config: cfg, Booted: dA, BootID: "b1", RollbackQueued: true}, in(PhaseRollingBack), actReportRebooting},
		{"rollback issued", observed{Image: A, Config: cfg, Booted: dA, BootID: "b1", State: working}, rolledBackIssued, actReportRebooting},
		{"rollback issued, reported", observed{Image: A, Config: cfg, Booted: dA, BootID: "b1", State: rebooting, Reason: "rolling back: "}, rolledBackIssued, actReboot},
		{"booted after the rollback", observed{Image: A, Config: cfg, Booted: dO, BootID: "b2"}, in(PhaseRollingBack), actFailRolledBack},
		{"failed", observed{Image: A, Config: cfg, Booted: dO}, in(PhaseFailed), actReportFailed},
		{"failed update replaced", observed{Image: A, Config: "rendered-2", Booted: dO}, in(PhaseFailed), actReadConfig},

		// Issue 20 point 5: a revert leaves nothing else staged, and a
		// verification runs to its verdict whatever is desired meanwhile.
		{"reverted, another image staged", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, State: working}, none, actUnstage},
		{"reverted, config applied, another image staged", observed{Image: O, Config: cfg, Booted: dO, Staged: dA}, onO, actUnstage},
		{"reverted before the asked reboot came", observed{Image: O, Config: cfg, Booted: dO, Staged: dA, State: rebooting, BootID: "b1"}, in(PhaseRebooting), actUnstage},
		{"reverted, the booted image staged again", observed{Image: O, Config: cfg, Booted: dO, Staged: dO}, onO, actInSync},
		{"changed after the reboot, not verifying yet", observed{Image: O, Config: cfg, Booted: dA, BootID: "b2"}, in(PhaseRebooting), actStartVerify},
		{"changed while verifying: check health", observed{Image: O, Config: cfg, Booted: dA, BootID: "b2"}, in(PhaseVerifying), actCheckHealth},
		{"changed while verifying: healthy", observed{Image: O, Config: cfg, Booted: dA, BootID: "b2", Health: healthy}, in(PhaseVerifying), actComplete},
		{"changed while verifying: sick within timeout", observed{Image: A, Config: "rendered-2", Booted: dA, BootID: "b2", Health: sick, Now: t0.Add(time.Minute), HealthCheckTimeout: time.Hour}, in(PhaseVerifying), actWaitForHealth},
		{"changed while verifying: sick past timeout", observed{Image: A, Config: "rendered-2", Booted: dA, BootID: "b2", Health: sick, Now: t0.Add(time.Hour), HealthCheckTimeout: time.Hour}, in(PhaseVerifying), actRecordRollback},
		{"changed while rolling back", observed{Image: O, Config: cfg, Booted: dA, BootID: "b1"}, in(PhaseRollingBack), actRollback},
		{"changed, booted after the rollback", observed{Image: O, Config: cfg, Booted: dO, BootID: "b2"}, in(PhaseRollingBack), actFailRolledBack},
	} {
		if got := decide(&tc.o, tc.rec); got != tc.want {
			t.Errorf("%s: decide = %s, want %s", tc.situation, got, tc.want)
		}
	}
}
