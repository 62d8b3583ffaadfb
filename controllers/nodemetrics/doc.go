// Package nodemetrics times the phases of node updates from the node
// annotations, on the controller (why not on the daemon: see
// internal/metrics), and counts drains, updates by reboot kind and
// rollbacks.
//
// Every phase boundary is an annotation one side writes once per update
// (<key> is the update key of the node's desired pair):
//
//	phase   starts when                          ends when
//	------  -----------------------------------  ------------------------------------------
//	stage   the controller writes a new desired  the daemon asks for the drain
//	        pair (not the one the node runs)     (desiredDrain=drain-<key>), or the update
//	                                             ends without one (live or config only)
//	drain   desiredDrain=drain-<key>             lastAppliedDrain=drain-<key> (drained)
//	apply   drained                              state=Rebooting, or the update ends (a
//	                                             live apply after a drain)
//	reboot  state=Rebooting                      the daemon's first other state after it
//	                                             (Done when healthy at once)
//	verify  state=Working after a reboot         the update ends
//	total   the update starts                    the update ends
//
// An update ends Done (current pair = desired pair, state Done) or
// Degraded; a newer desired pair abandons it unobserved. Its reboot kind
// is that of its first Rebooting report: soft when the disruption
// annotation then says SoftReboot (and still does at the end: a soft
// reboot bootc refused is a full one), else full; none without a reboot. An
// update that ends Degraded after a reboot left the node on its previous
// image (the daemon rolled back, or the boot check or the boot loader
// did): a rollback. A drain ends Succeeded when acknowledged and TimedOut
// when the controller marks the node Degraded while it is pending.
//
// step (pure, phases.go) turns one observed change of a node into these
// observations; Tracker feeds it every Node update the informer delivers
// (each one, not the coalesced reconcile requests a reconciler gets, so
// a short Rebooting is not missed), on the leader only, so that two
// replicas do not count the same update twice. What it remembers per node
// is in memory: a phase running when the controller started is not timed,
// and an update whose start it did not see is not counted.
package nodemetrics
