// Package rollout is the node daemon's update logic. The daemon watches
// only its own Node and, on every event and every resync, observes the
// node's annotations, `bootc status`, its own state file and the boot id;
// decide (decide.go, pure) names the next action, the sync performs it
// (actions.go) and asks again, until an action that waits. Every action
// is idempotent or guarded by what it recorded, so a daemon killed after
// any of them and started again converges without a second download,
// drain or reboot.
//
// One vocabulary: the daemon reports a node state (the state annotation:
// Done, Working, Rebooting, Degraded); its state file records the phase
// of an update past its drain (rebooting, verifying, rollingBack,
// failed; none before the drain); decide returns actions, whose names
// are also the crash points of the tests. An update of the image:
//
//	phase        reported    observed                              action
//	-----------  ----------  ------------------------------------  ------------------
//	(none)       any         no desired image                      idle
//	(none)       any         desired image not by digest           reject -> failed
//	(none)       any         desired image booted, another staged  unstage (switch to it)
//	                         (not a locked stage still asked for)
//	(none)       any         desired image booted, config applied, stageAhead, inSync
//	                         desiredStage set and not staged (or
//	                         staged unverified where the pool
//	                         signs), not refused by the policy
//	(none)       any         desired image booted, config applied, decideAhead, inSync
//	                         staged ahead, desiredStageConfig set,
//	                         its update not decided
//	(none)       any         desired image booted, config not      readConfig,
//	                         applied                               applyConfig, inSync
//	(none)       any         drain asked and given up on           drainFailed (reports
//	                         (drainFailure names it)               Degraded, waits)
//	(none)       Degraded    drain asked, no drainFailure, no      drainFailed (waits)
//	                         report of one recorded (an older
//	                         controller's Degraded)
//	(none)       Degraded    drain asked, no drainFailure, its     readConfig,
//	                         report recorded (a person removed     reportWorking,
//	                         the verdict: try again)               waitForDrain (waits)
//	(none)       any         desired image booted, staged and      adoptBoot -> verifying
//	                         decided, no reboot recorded
//	(none)       Done        desired image not booted              readConfig,
//	                                                               reportWorking
//	(none)       Working     not staged, or staged unverified      stage
//	                         where the pool signs
//	(none)       Working     staged, no decision for the update    decide
//	(none)       Working     decided ahead, policy not read        readPolicy
//	(none)       Working     decided ahead, the policy changed     decide
//	(none)       any         applied live, desired image staged    inSync
//	(none)       Working     decided Live, no drain in the policy  applyLive (or falls
//	                                                               back to Reboot)
//	(none)       Working     decided, no drain asked               requestDrain
//	(none)       Working     drained, decided Live                 applyLive
//	(none)       Working     drain asked, not applied              waitForDrain (waits)
//	(none)       Working     drained                               writeItems,
//	                                                               recordReboot -> rebooting
//	rebooting    Working     not rebooted                          reportRebooting
//	rebooting    Rebooting   not rebooted                          reboot (waits)
//	rebooting    Rebooting   rebooted                              startVerify -> verifying
//	verifying    Rebooting   another image booted                  failDidNotBoot -> failed
//	verifying    Rebooting   health not checked                    checkHealth
//	verifying    any         healthy                               complete (Done, uncordon)
//	verifying    Working     unhealthy, within the timeout         waitForHealth (waits)
//	verifying    Working     unhealthy, past the timeout           recordRollback -> rollingBack
//	rollingBack  Working     same boot id, rollback not issued     rollback (bootc rollback;
//	                                                               where the pool signs,
//	                                                               to the image before only)
//	rollingBack  Working     same boot id, rollback issued/queued  reportRebooting, reboot
//	rollingBack  Rebooting   another boot id                       failRolledBack -> failed
//	failed       Degraded    same desired pair                     reportFailed (uncordon)
//
// "Rebooted" is another boot id; for a soft reboot (the update's
// disruption decision was SoftReboot), which keeps the boot id, also
// systemd's SoftRebootsCount above the count recorded by recordReboot.
// reboot then runs `bootc upgrade --from-downloaded --apply
// --soft-reboot=required`; bootc refusing it turns it into a full
// reboot, recorded with the reason.
//
// drainFailed: a drain the controller gives up on (past the pool's
// drainTimeout) is its verdict in the node's drainFailure, which names
// the drain request; the daemon, the one writer of state and reason,
// reports it as Degraded with the verdict's reason, and the node stays
// cordoned. The state file records the report (DrainFailed) before it
// is written, so that a node Degraded with its drain asked and no
// verdict is told apart: the daemon's own report of a verdict a person
// removed to have the drain tried again (the daemon reports Working and
// waits for the drain), or, with no report recorded, an older
// controller's verdict written as the state itself, left as it is. A
// verdict naming another request is ignored; the controller removes it
// when it carries out any other.
//
// adoptBoot: bootc finalizes a staged deployment at any clean shutdown,
// so a reboot Strata did not ask for (another reboot manager, a person)
// between the stage and the drain boots the desired image without the
// drain. The daemon recognises it (the image booted, its disruption
// decided, no reboot recorded) and runs the health gate anyway, with an
// Event saying so. (A crash or power loss finalizes nothing: the old
// image boots and the update stages again.) Where bootc can, stage
// locks the staged deployment (switch --download-only; on 1.16 switch
// then upgrade --download-only, with a short unlocked window), so that
// such a reboot boots the current image and the update proceeds; the
// daemon unlocks it (upgrade --from-downloaded) before its own reboot
// and after a live apply, and the soft reboot applies it.
//
// Staging ahead (the pool's stageAhead): the controller names an image
// in desiredStage on a node that is not updating yet. Once the node runs
// its desired image and config, stageAhead downloads it and stages it
// locked (switch --download-only, only where bootc has it: staged
// unlocked, any reboot would boot it without a drain), and the daemon
// reports it as stagedImage. With the stage's config (desiredStageConfig)
// it then decides the update's disruption ahead (decideAhead), as decide
// would at the node's turn, from the config and image it runs; a Live
// decision without a drain is reported as stagedLive (the update key),
// and the controller takes such a node without counting it against
// maxUnavailable, as it never becomes unavailable. When the node's turn
// comes the desired image is the staged one: stage is skipped, and so is
// decide when decided ahead from the same current config, so the
// update's slot is a drain and a reboot, or the live apply alone. The
// policy is read again at the turn (beside the config and the Working
// report): one changed since the decision ahead takes the decision
// again, so that the node follows the admin's latest word. (Until the
// turn, a node whose decision ahead was Live is still taken as live: a
// decision taken again that drains counts as a failed live apply does,
// within maxUnavailable + stageAhead.) A reboot in between boots the
// current image and drops the download (ostree); the daemon stages
// ahead again if still asked.
// A locked stage no longer asked for is unstaged like any other.
//
// Signatures: where the pool signs (the node's imageSignaturePolicy
// annotation), every path by which an image reaches the node verifies
// it with bootc's --enforce-container-sigpolicy, after writing the
// policy (merged into the node's policy.json, package sigpolicy): the
// stage, the stage ahead, and the first boot (package firstboot). bootc
// verifies only when it fetches, and at the node's turn a stage ahead is
// only unlocked (--from-downloaded fetches nothing), so a staged image
// that bootc does not report as verified (its reference's signature is
// not containerPolicy: staged by an older daemon, or before the pool
// signed) is staged again, enforcing the policy, before anything boots
// it; and a bootc that cannot enforce in a download-only switch does not
// stage ahead for a pool that signs (the NotStagedAhead Event says so).
// An image the policy refuses ahead is not staged (a StageAheadRefused
// Event; not tried again by this daemon) and, at its turn, fails the
// update: Degraded, refused by the signature policy. `bootc rollback`
// verifies nothing either: the daemon rolls back only to the image the
// node booted when the update's reboot was asked for (recorded then);
// a rollback deployment that is another one fails the update instead,
// the node staying on the image it was verified for.
//
// A config change for the image the node runs takes no drain and no
// reboot. A node is Done only when nothing is staged but the desired
// image: desired set back to the booted image while another one is
// staged (a revert mid-rollout) first stages the booted image again, as
// bootc has no unstage and any reboot boots what is staged. A new desired
// pair starts over from (none), except that an update whose reboot
// happened (rebooting from another boot id, verifying, rollingBack) runs
// to its verdict first: complete, or rolled back and failed. Its health
// check and rollback are never dropped for a newer pair. decide_test.go
// has one row per line of this table.
//
// decide (actDecide) computes what the update costs the node once its
// image is staged, so that bootc reports the staged deployment's
// soft-reboot capability: package disruption over the changes between
// the node's current and the desired rendered config, whether the image
// changed below its configuration layer (Images: the layer lists of the
// booted and desired images), and the `cluster` MachineConfiguration's
// policy (its merged status when it is current, else its spec merged
// over the defaults, else the defaults). The decision and its reason are
// recorded in the state file, the disruption annotation and an Event.
//
// A Live decision is applied live (applyLive): the node items, the
// changed /etc paths written as the staged deployment has them (package
// liveapply, so that the next boot finds no local modification), then
// the actions in order (package unitaction); no reboot, and a drain only
// when the policy asks for one. The image stays staged, so any later boot
// boots it; the node reports the config and the staged image as current
// and the booted image as bootedImage, so that the pool counts the node
// updated and image GC spares both. A refused or mismatched live write
// or a failed action turns the decision into a full reboot, with the
// reason. The paths written live are recorded (LivePaths) until an
// update completes after a boot: before any reboot into an image other
// than the live-applied one (a later update on top of it), resyncLive
// writes them as that image has them, since ostree's /etc merge from the
// booted deployment would otherwise keep the live version over the new
// image's. A SoftReboot decision drains, then soft-reboots (see above),
// and is verified as after a reboot: the desired digest booted, the
// health check, the boot check's handshake.
//
// The node's boot check (package bootcheck, in every image Strata builds)
// rolls the node back when no daemon verifies the boot: recordReboot
// tells it the digest and the health check timeout, startVerify that the
// daemon verifies the boot itself, complete that the node is healthy.
// When the check rolled the node back, failDidNotBoot reports its
// verdict as the reason.
//
// After every step that changes what it says, the daemon mirrors its
// state into the node's MachineConfigNode (mcn.go): the desired and
// current pair and OpenShift's phase conditions, computed in one
// function from the Node's annotations, bootc's status and the state
// file. The annotations stay the protocol; the mirror is for people and
// scripts, and a failed write of it is retried at the next step, never
// holding the update back.
//
// The sub-packages hold the host side: bootc runs the bootc command (each
// verb with a timeout) and parses its status, bootcheck is the boot
// check's script and files, hostfs writes files under the host root
// without following any link out of it.
package rollout
