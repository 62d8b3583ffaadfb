// Package rollout is the node daemon's update logic: drain, write the
// /var-bound files, bootc switch by digest, reboot, verify, uncordon, and
// roll back a node that does not come back healthy.
package rollout
