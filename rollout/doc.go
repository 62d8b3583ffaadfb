// Package rollout is the node daemon's update logic. The daemon watches
// only its own Node and, on every event and every resync, reads the
// node's annotations, `bootc status`, its own state file and the boot id,
// and takes the next step of an update: stage the desired image with
// `bootc switch` while workloads still run, ask the rollout controller to
// drain the node, write the /var-bound node items, reboot, verify the
// booted digest and the node's health, and ask for the uncordon; a node
// that does not come back healthy is rolled back once and reported
// Degraded. Every step is idempotent, so a daemon killed anywhere and
// started again converges without a second download, drain or reboot.
//
// The sub-packages hold the host side: bootc runs the bootc command and
// parses its status, hostfs writes files under the host root without
// following any link out of it.
package rollout
