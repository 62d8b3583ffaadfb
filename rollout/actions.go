package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/disruption"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/bootcheck"
)

// perform does one action that decide chose. Actions that change the
// host or the state file are idempotent or guarded by what they record,
// so that a daemon killed after any of them converges (TestKilledAtEachStep).
func (d *Daemon) perform(ctx context.Context, s *scope, o *observed, a action) (Result, error) {
	image, config := o.Image, o.Config
	key := UpdateKey(image, config)
	u := s.rec.Update
	var err error
	switch a {
	case actIdle:
		s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateDone)
		s.report(v1alpha1.ReasonAnnotation, "")
	case actReadConfig:
		if dr := s.rec.Disruption; dr != nil && dr.Ahead && dr.Key == key && s.policy == nil {
			// Its turn: readPolicy will ask whether the policy changed
			// since; read beside the config and the Working report.
			d.readPolicyBeside(ctx, s)
		}
		err = d.readConfig(ctx, s, config)
	case actReject:
		err = d.reject(s, image, config, key)
	case actApplyConfig:
		err = d.applyConfig(s, image, config)
	case actInSync:
		if o.StageAhead != "" && !o.CanStageAhead && o.StageAhead != bootc.DigestOf(image) && d.saidNoStageAhead != s.noStageAhead {
			// Staging unlocked ahead would let any reboot boot the
			// image without its drain, and staging unverified would
			// let the turn boot an image nobody verified: the node
			// downloads at its turn.
			d.saidNoStageAhead = s.noStageAhead
			s.log.Info("Not staging ahead", "why", s.noStageAhead)
			d.event(s, corev1.EventTypeNormal, "NotStagedAhead", "Stage",
				"Not downloading %s ahead: %s; the node downloads it at its turn",
				s.annotation(v1alpha1.DesiredStageAnnotation), s.noStageAhead)
		}
		d.inSync(s, config, key)
	case actDrainFailed:
		err = d.drainFailed(s, o)
	case actReportWorking:
		s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking)
		s.report(v1alpha1.ReasonAnnotation, "")
		if d.caps != nil && d.caps.LockedStaging() {
			// The stage that follows is locked: no boot takes it
			// before the drain, which waits for this patch. It can run
			// beside the patch; an unlocked stage cannot.
			err = d.flushBeside(ctx, s)
		} else {
			err = d.flush(ctx, s)
		}
	case actStage:
		err = d.stage(ctx, s, image)
	case actUnstage:
		err = d.unstage(ctx, s, image)
	case actStageAhead:
		err = d.stageAhead(ctx, s)
	case actDecide:
		err = d.decideDisruption(ctx, s, image, config, key, false)
	case actDecideAhead:
		stageImage, stageConfig := o.StageImage, o.StageConfig
		err = d.decideDisruption(ctx, s, stageImage, stageConfig, UpdateKey(stageImage, stageConfig), true)
	case actReadPolicy:
		err = d.readPolicy(ctx, s)
	case actApplyLive:
		err = d.applyLive(ctx, s, image, config)
	case actRequestDrain:
		drain := v1alpha1.DrainRequestPrefix + key
		s.report(v1alpha1.DesiredDrainAnnotation, drain)
		if err = d.flush(ctx, s); err == nil {
			s.log.Info("Asked for the drain", "desiredDrain", drain)
		}
	case actWaitForDrain:
		s.log.V(1).Info("Waiting for the drain", "desiredDrain", v1alpha1.DrainRequestPrefix+key)
	case actWriteItems:
		s.skipped, err = d.writeItems(s)
		s.itemsDone = err == nil
	case actRecordReboot:
		// The boot check learns what to expect first: a crash after it
		// leaves a check of a boot that never comes, which the next
		// recordReboot replaces.
		if err = bootcheck.WriteExpect(bootcheck.Dir(d.StateDir), bootc.DigestOf(image), s.healthLimit); err != nil {
			break
		}
		nu := &UpdateRecord{Key: key, Image: image, Config: config, Phase: PhaseRebooting, BootID: s.bootID, From: s.host.Status.Booted.Digest(), Skipped: s.skipped}
		if dr := s.rec.Disruption; dr != nil && dr.Key == key && dr.Kind == disruption.SoftReboot && d.Soft != nil {
			// The count before the soft reboot: it going up is how the
			// daemon sees it happen, the boot id being kept.
			count, cerr := d.Soft.SoftRebootCount(ctx)
			if cerr != nil {
				// Without the count (systemd older than 254 cannot
				// soft-reboot at all) a soft reboot could not be seen.
				dr.Kind = disruption.Reboot
				dr.Reason = clip(dr.Reason + "; systemd's soft reboot count could not be read (" + cerr.Error() + "): a full reboot instead")
				s.report(v1alpha1.DisruptionAnnotation, dr.summary())
				d.event(s, corev1.EventTypeWarning, "Disruption", "SoftReboot", "%s", dr.summary())
			} else {
				nu.Soft, nu.SoftReboots = true, count
			}
		}
		s.rec.Update = nu
		err = SaveRecord(d.StateDir, s.rec)
	case actReportRebooting:
		s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateRebooting)
		if u.Phase == PhaseRollingBack {
			s.report(v1alpha1.ReasonAnnotation, rollbackReason(u))
		}
		err = d.flush(ctx, s)
	case actReboot:
		if s.rebootAgain {
			s.log.Info("The node did not reboot: asking again", "bootID", s.bootID)
		}
		if err := d.resyncLive(ctx, s, u); err != nil {
			return Result{}, err
		}
		if u.Soft {
			return d.softReboot(ctx, s, u)
		}
		return d.reboot(ctx, s)
	case actAdoptBoot:
		err = d.adoptBoot(s, image, config, key)
	case actStartVerify:
		err = d.startVerify(s, u)
	case actCheckHealth:
		why := d.health(ctx, s)
		s.health = &why
	case actWaitForHealth:
		return d.waitForHealth(s, o, u), nil
	case actComplete:
		err = d.complete(ctx, s, u)
	case actFailDidNotBoot:
		booted := s.host.Status.Booted.PullSpec()
		reason := fmt.Sprintf("image %s did not boot: the node booted %s instead and keeps running it", u.Image, booted)
		// The node's boot check rolled it back: the daemon of that boot
		// never reported it healthy.
		if why := bootcheck.Verdict(bootcheck.Dir(d.StateDir), bootc.DigestOf(u.Image)); why != "" {
			reason = fmt.Sprintf("image %s failed: %s; the node runs %s again", u.Image, why, booted)
		}
		s.log.Info("The desired image did not boot", "booted", booted, "reason", reason)
		err = d.fail(s, u, "Verify", reason)
	case actRecordRollback:
		err = d.recordRollback(s, u)
	case actRollback:
		err = d.rollback(ctx, s, u)
	case actFailRolledBack:
		booted := s.host.Status.Booted
		reason := fmt.Sprintf("%s; rolled back to %s", u.Failure, booted.PullSpec())
		if booted.Digest() == bootc.DigestOf(u.Image) {
			reason = fmt.Sprintf("%s; the rollback did not take effect: the node still runs %s", u.Failure, booted.PullSpec())
		}
		s.log.Info("Rolled back", "booted", booted.PullSpec())
		err = d.fail(s, u, "Rollback", reason)
	case actReportFailed:
		// The node runs its old image and is healthy: uncordon it.
		s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded)
		s.report(v1alpha1.ReasonAnnotation, clip(u.Reason))
		s.report(v1alpha1.DesiredDrainAnnotation, v1alpha1.UncordonRequestPrefix+u.Key)
	default:
		return Result{}, fmt.Errorf("unknown action %q", a)
	}
	if err != nil {
		return Result{}, err
	}
	return Result{}, d.step(a)
}

// drainFailed reports the controller's verdict on the drain asked for
// (drainFailure) as Degraded with its reason: the daemon is the one writer
// of the node's state and reason. The state file records the report
// first, so that a crash between the two leaves the verdict to report
// again, never a report the daemon would take for an older controller's.
// A node reported Degraded by an older controller, which wrote no
// verdict, is left as it is.
func (d *Daemon) drainFailed(s *scope, o *observed) error {
	if o.DrainFailed != o.DesiredDrain {
		s.log.V(1).Info("The drain failed (an older controller's verdict): nothing to do for this update")
		return nil
	}
	// As the controller wrote it, cut to its own bound: the pods and
	// budgets that blocked the drain, which maxReason would cut short.
	_, reason, _ := v1alpha1.ParseDrainFailure(s.annotation(v1alpha1.DrainFailureAnnotation))
	if s.rec.DrainFailed != o.DrainFailed {
		s.rec.DrainFailed = o.DrainFailed
		if err := SaveRecord(d.StateDir, s.rec); err != nil {
			return err
		}
	}
	if s.annotation(v1alpha1.StateAnnotation) != v1alpha1.NodeStateDegraded || s.annotation(v1alpha1.ReasonAnnotation) != reason {
		s.log.Info("The controller gave up on the drain: reporting Degraded", "desiredDrain", o.DesiredDrain, "reason", reason)
	}
	s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded)
	s.report(v1alpha1.ReasonAnnotation, reason)
	return nil
}

// reject records an update whose desired image or config the node cannot
// apply as failed.
func (d *Daemon) reject(s *scope, image, config, key string) error {
	inv := &invalidConfigError{what: "desired image " + image, err: errors.New("not a repo@sha256:<digest> pull spec")}
	if s.config == configInvalid {
		inv = s.configErr
	}
	s.rec.Update = &UpdateRecord{Key: key, Image: image, Config: config, Phase: PhaseFailed, Reason: inv.Error()}
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return err
	}
	s.log.Info("The desired update cannot be applied", "error", inv.Error())
	d.event(s, corev1.EventTypeWarning, "InvalidConfig", "Update", "%s", inv.Error())
	return nil
}

// fail records update u as failed, for reportFailed.
func (d *Daemon) fail(s *scope, u *UpdateRecord, eventAction, reason string) error {
	u.Phase, u.Reason = PhaseFailed, reason
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return err
	}
	d.event(s, corev1.EventTypeWarning, "UpdateFailed", eventAction, "%s", reason)
	return nil
}

// applyConfig applies a config on the image the node already runs: the
// node items, no drain, no reboot.
func (d *Daemon) applyConfig(s *scope, image, config string) error {
	skipped, err := d.writeItems(s)
	if err != nil {
		return err
	}
	rec := s.rec
	rec.CurrentConfig, rec.CurrentImage, rec.Skipped, rec.Update = config, image, skipped, nil
	if err := SaveRecord(d.StateDir, rec); err != nil {
		return err
	}
	s.log.Info("Applied the config without a reboot")
	d.event(s, corev1.EventTypeNormal, "Updated", "Update", "Applied config %s on image %s without a reboot", config, image)
	return nil
}

// inSync reports the config the node runs as Done.
func (d *Daemon) inSync(s *scope, config, key string) {
	d.reportCurrent(s)
	s.report(v1alpha1.CurrentConfigAnnotation, config)
	s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateDone)
	s.report(v1alpha1.ReasonAnnotation, clip(strings.Join(s.rec.Skipped, "; ")))
	// A drain asked for an update this one replaced must not leave the
	// node cordoned.
	if strings.HasPrefix(s.annotation(v1alpha1.DesiredDrainAnnotation), v1alpha1.DrainRequestPrefix) {
		s.report(v1alpha1.DesiredDrainAnnotation, v1alpha1.UncordonRequestPrefix+key)
	}
}

// stage switches to image, with the pull secret read again: it may have
// been rotated.
func (d *Daemon) stage(ctx context.Context, s *scope, image string) error {
	if err := d.ensureAuth(ctx, s, true); err != nil {
		return err
	}
	enforce, err := d.ensureSignaturePolicy(s)
	if err != nil {
		return err
	}
	s.log.Info("Staging the desired image", "enforceSignatures", enforce)
	d.readBeside(ctx, s, image, s.annotation(v1alpha1.DesiredConfigAnnotation))
	start := d.now()
	locked, err := d.switchLocked(ctx, image, enforce)
	if err != nil {
		d.authSuspect = true
		if enforce && RefusedBySignature(err) {
			return d.refuseUnsigned(s, image, err)
		}
		return err
	}
	if locked {
		s.log.Info("Locked the staged image: no reboot applies it before the drain")
	}
	s.staged, s.stagedLocked, s.stagedImage, s.stagedVerified = bootc.DigestOf(image), locked, image, enforce
	s.log.Info("Staged the desired image", "seconds", d.now().Sub(start).Seconds())
	d.event(s, corev1.EventTypeNormal, "Staged", "Switch", "Staged image %s for the next boot", image)
	return nil
}

// stageAhead downloads the image of desiredStage and stages it locked,
// with the pull secret read again (the controller may name another one
// with the request). decide asks for it only where bootc's switch
// downloads locked in one step, so no reboot ever boots it, and, where
// the pool signs, verifies in that step (stageAheadPossible): the
// signature policy is written first and enforced, as for stage, since
// at the node's turn the stage is only unlocked. An image the policy
// refuses is not staged; the Event says so, and the turn refuses it as
// the update's.
func (d *Daemon) stageAhead(ctx context.Context, s *scope) error {
	image := s.annotation(v1alpha1.DesiredStageAnnotation)
	if err := d.ensureAuth(ctx, s, true); err != nil {
		return err
	}
	enforce, err := d.ensureSignaturePolicy(s)
	if err != nil {
		return err
	}
	s.log.Info("Staging ahead of the update", "desiredStage", image, "enforceSignatures", enforce)
	d.readBeside(ctx, s, image, s.annotation(v1alpha1.DesiredStageConfigAnnotation))
	start := d.now()
	if err := d.Lock.SwitchWith(ctx, image, bootc.SwitchOptions{DownloadOnly: true, EnforceSigPolicy: enforce}); err != nil {
		d.authSuspect = true
		if enforce && RefusedBySignature(err) {
			d.refusedAhead = image
			s.log.Info("The image to stage ahead was refused by the signature policy", "desiredStage", image, "error", err.Error())
			d.event(s, corev1.EventTypeWarning, "StageAheadRefused", "Stage",
				"Not staging image %s ahead: refused by the signature policy: %v", image, err)
			return nil
		}
		// The node is not updating, so its reason says nothing: the
		// Event does; the sync is retried.
		d.event(s, corev1.EventTypeWarning, "StageAheadFailed", "Stage", "Downloading image %s ahead failed: %v", image, err)
		return fmt.Errorf("stage %s ahead: %w", image, err)
	}
	s.staged, s.stagedLocked, s.stagedImage, s.stagedVerified = bootc.DigestOf(image), true, image, enforce
	s.log.Info("Staged ahead, locked", "desiredStage", image, "seconds", d.now().Sub(start).Seconds())
	d.event(s, corev1.EventTypeNormal, "StagedAhead", "Stage", "Downloaded image %s ahead of the node's update; staged locked, so no reboot boots it", image)
	return nil
}

// capabilities are the StagingLock's, read once; nil without one.
func (d *Daemon) capabilities(ctx context.Context) (*bootc.Capabilities, error) {
	if d.Lock == nil {
		return nil, nil
	}
	if d.caps == nil {
		c, err := d.Lock.Capabilities(ctx)
		if err != nil {
			return nil, fmt.Errorf("read bootc's options: %w", err)
		}
		d.caps = &c
	}
	return d.caps, nil
}

// switchLocked stages image locked where bootc can: switch
// --download-only, or on a bootc whose switch lacks it (1.16) a switch
// then upgrade --download-only, which leaves a short unlocked window
// (adoptBoot covers a reboot in it). It says whether the stage is
// locked.
func (d *Daemon) switchLocked(ctx context.Context, image string, enforce bool) (bool, error) {
	caps, err := d.capabilities(ctx)
	if err != nil {
		return false, err
	}
	if enforce {
		return d.switchEnforced(ctx, image, caps)
	}
	switch {
	case caps != nil && caps.LockedStaging():
		return true, d.Lock.SwitchWith(ctx, image, bootc.SwitchOptions{DownloadOnly: true})
	case caps != nil && caps.UpgradeDownloadOnly:
		if err := d.Bootc.Switch(ctx, image); err != nil {
			return false, err
		}
		return true, d.Lock.LockStaged(ctx)
	}
	return false, d.Bootc.Switch(ctx, image)
}

// unlock makes a locked staged deployment one that the next boot
// applies: before the daemon's own reboot, and after a live apply, so
// that any later boot boots the image whose /etc the node runs.
func (d *Daemon) unlock(ctx context.Context, s *scope) error {
	if d.Lock == nil {
		return nil
	}
	host, err := d.status(ctx, s)
	if err != nil {
		return err
	}
	if st := host.Status.Staged; st == nil || !st.DownloadOnly {
		return nil
	}
	if err := d.Lock.ApplyDownloaded(ctx, bootc.Apply{}); err != nil {
		return fmt.Errorf("unlock the staged image: %w", err)
	}
	s.log.Info("Unlocked the staged image for the next boot")
	return nil
}

// unstage replaces the image staged over the booted one, desired again,
// by the desired one. bootc has no command that drops a staged
// deployment but `bootc rollback`, which also queues the rollback
// deployment; `bootc switch` to the booted image's digest stages a
// deployment of what already runs (BOOTC.md), so that whatever reboots
// the node next boots the desired image. A replaced update that had not
// rebooted yet is forgotten first: its reboot will never come, and a
// later boot must not be taken for it.
func (d *Daemon) unstage(ctx context.Context, s *scope, image string) error {
	if u := s.rec.Update; u != nil && u.Phase != PhaseFailed {
		s.log.Info("Dropping the replaced update", "replacedImage", u.Image, "replacedConfig", u.Config)
		s.rec.Update = nil
		if err := SaveRecord(d.StateDir, s.rec); err != nil {
			return err
		}
	}
	replaced := s.host.Status.Staged.PullSpec()
	s.log.Info("Replacing the staged image by the booted one, desired again", "staged", replaced)
	if err := d.stage(ctx, s, image); err != nil {
		return err
	}
	d.event(s, corev1.EventTypeNormal, "Unstaged", "Switch", "Replaced staged image %s by the booted image %s, desired again", replaced, image)
	return nil
}

// reboot runs the reboot command. No action follows, in this process,
// until RebootTimedOut.
func (d *Daemon) reboot(ctx context.Context, s *scope) (Result, error) {
	if err := d.unlock(ctx, s); err != nil {
		return Result{}, err
	}
	s.log.Info("Rebooting", "bootID", s.bootID)
	d.event(s, corev1.EventTypeNormal, "Rebooting", "Reboot", "Rebooting into image %s", s.annotation(v1alpha1.DesiredImageAnnotation))
	d.rebootRequested = true
	if err := d.Machine.Reboot(ctx); err != nil {
		d.rebootRequested = false
		return Result{}, err
	}
	return Result{Rebooting: true}, nil
}

// softReboot applies the staged deployment with a soft reboot. bootc
// refusing it (the deployment not capable after all) turns the update's
// reboot into a full one, recorded with the reason; a daemon without a
// SoftRebooter (an older one recorded Soft) does the same.
func (d *Daemon) softReboot(ctx context.Context, s *scope, u *UpdateRecord) (Result, error) {
	var err error
	if d.Soft == nil {
		err = errors.New("this daemon cannot soft-reboot")
	} else {
		s.log.Info("Soft-rebooting", "bootID", s.bootID, "softReboots", u.SoftReboots)
		d.event(s, corev1.EventTypeNormal, "Rebooting", "SoftReboot", "Soft-rebooting into image %s", u.Image)
		d.rebootRequested = true
		if err = d.Soft.SoftReboot(ctx); err == nil {
			return Result{Rebooting: true}, nil
		}
		d.rebootRequested = false
	}
	u.Soft = false
	if dr := s.rec.Disruption; dr != nil && dr.Key == u.Key {
		dr.Kind = disruption.Reboot
		dr.Reason = clip(dr.Reason + "; the soft reboot failed (" + err.Error() + "): a full reboot instead")
		s.report(v1alpha1.DisruptionAnnotation, dr.summary())
	}
	if serr := SaveRecord(d.StateDir, s.rec); serr != nil {
		return Result{}, serr
	}
	s.log.Info("The soft reboot failed: rebooting fully", "error", err.Error())
	d.event(s, corev1.EventTypeWarning, "Disruption", "SoftReboot", "The soft reboot failed (%s): a full reboot instead", err.Error())
	if err := d.flush(ctx, s); err != nil {
		return Result{}, err
	}
	return d.reboot(ctx, s)
}

// adoptBoot takes an update whose image the node booted without the
// drain and the reboot (another reboot finalized the staged deployment)
// into verification: the health gate, and its rollback, run as after the
// update's own reboot.
func (d *Daemon) adoptBoot(s *scope, image, config, key string) error {
	s.rec.Update = &UpdateRecord{Key: key, Image: image, Config: config, Phase: PhaseRebooting, BootID: s.bootID}
	s.log.Info("The desired image booted without the drain: checking its health as after a reboot")
	d.event(s, corev1.EventTypeWarning, "BootedWithoutDrain", "Verify",
		"Image %s booted without the drain (a reboot Strata did not ask for); checking its health as after a reboot", image)
	return d.startVerify(s, s.rec.Update)
}

func (d *Daemon) startVerify(s *scope, u *UpdateRecord) error {
	// The daemon runs and verifies this boot: the node's boot check
	// leaves the verdict and the rollback to it.
	if err := bootcheck.MarkVerifying(bootcheck.Dir(d.StateDir), bootc.DigestOf(u.Image)); err != nil {
		return err
	}
	now := d.now().UTC()
	u.Phase, u.VerifyStarted = PhaseVerifying, &now
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return err
	}
	s.log.Info("Booted after the update's reboot", "bootID", s.bootID)
	return nil
}

func (d *Daemon) waitForHealth(s *scope, o *observed, u *UpdateRecord) Result {
	left := u.VerifyStarted.Add(o.HealthCheckTimeout).Sub(o.Now)
	s.log.Info("Waiting for the node to become healthy", "why", *o.Health, "secondsLeft", int(left.Seconds()))
	s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking)
	return Result{RequeueAfter: min(left, healthPoll)}
}

// complete ends a verified update: the items written again (owner names
// that only the new image's /etc/passwd knows resolve now; Apply is
// idempotent), the update recorded as current, Done, and the uncordon.
func (d *Daemon) complete(ctx context.Context, s *scope, u *UpdateRecord) error {
	skipped := u.Skipped
	if err := d.readConfig(ctx, s, u.Config); err != nil {
		return err
	}
	if s.config == configValid {
		var err error
		if skipped, err = d.writeItems(s); err != nil {
			return err
		}
	}
	// Healthy: the node's boot check stands down.
	if err := bootcheck.MarkHealthy(bootcheck.Dir(d.StateDir), bootc.DigestOf(u.Image)); err != nil {
		return err
	}
	rec := s.rec
	rec.CurrentConfig, rec.CurrentImage, rec.Skipped, rec.Update = u.Config, u.Image, skipped, nil
	// The booted image's /etc merge took in every live write.
	rec.LivePaths = nil
	if err := SaveRecord(d.StateDir, rec); err != nil {
		return err
	}
	s.log.Info("Update verified", "booted", s.host.Status.Booted.PullSpec())
	d.event(s, corev1.EventTypeNormal, "Updated", "Verify", "Booted image %s healthy with config %s", u.Image, u.Config)
	s.report(v1alpha1.CurrentConfigAnnotation, u.Config)
	s.report(v1alpha1.StateAnnotation, v1alpha1.NodeStateDone)
	s.report(v1alpha1.ReasonAnnotation, clip(strings.Join(skipped, "; ")))
	s.report(v1alpha1.DesiredDrainAnnotation, v1alpha1.UncordonRequestPrefix+u.Key)
	return nil
}

func (d *Daemon) recordRollback(s *scope, u *UpdateRecord) error {
	u.Phase = PhaseRollingBack
	u.BootID = s.bootID
	u.Failure = fmt.Sprintf("image %s was not healthy within %s of its boot: %s", u.Image, s.healthLimit, *s.health)
	if err := SaveRecord(d.StateDir, s.rec); err != nil {
		return err
	}
	s.log.Info("The update failed its health check: rolling back", "why", *s.health)
	d.event(s, corev1.EventTypeWarning, "RollingBack", "Rollback", "%s; rolling back", u.Failure)
	return nil
}

// rollback queues the rollback deployment, reporting why first. Where
// the pool signs, only to the image the node ran before the update:
// `bootc rollback` verifies nothing, so any other deployment (one a
// person or another tool put there) would boot unverified; the update
// fails instead, and the node stays on the image it was verified for.
func (d *Daemon) rollback(ctx context.Context, s *scope, u *UpdateRecord) error {
	if s.annotation(v1alpha1.ImageSignaturePolicyAnnotation) != "" && u.From != "" {
		host, err := d.status(ctx, s)
		if err != nil {
			return err
		}
		if target := host.Status.Rollback; target.Digest() != u.From {
			name := "none"
			if target != nil {
				name = target.PullSpec()
			}
			s.log.Info("Not rolling back to an image other than the one before the update", "rollback", name, "from", u.From)
			return d.fail(s, u, "Rollback", clip(fmt.Sprintf("%s; not rolled back: the rollback deployment (%s) is not the image the node ran before the update (%s), and bootc rollback verifies no signature; the node stays on %s", u.Failure, name, u.From, u.Image)))
		}
	}
	s.report(v1alpha1.ReasonAnnotation, rollbackReason(u))
	if err := d.flush(ctx, s); err != nil {
		return err
	}
	if err := d.Bootc.Rollback(ctx); err != nil {
		return err
	}
	u.RollbackIssued = true
	return SaveRecord(d.StateDir, s.rec)
}
