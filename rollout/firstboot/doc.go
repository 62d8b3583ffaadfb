// Package firstboot is `strata-daemon firstboot`: a new node's first
// boot, run by strata-firstboot.service (which the config server serves)
// before kubelet.service, with no Node and no API server to talk to.
// It takes the node to the pool's image with the daemon's own parts (its
// bootc, machine and boot check, package rollout), in three boots at
// most and one reboot:
//
//	state file        booted          action
//	----------------  --------------  -----------------------------------------
//	done              any             nothing (the unit's condition skips it)
//	(none)            the image       health gate, done: zero reboots
//	(none)            another image   write the pull secret for bootc (and the
//	                                  signature policy), bootc switch by digest
//	                                  (enforcing the policy), check the staged
//	                                  digest (and that bootc verified it), arm
//	                                  the boot check, record, reboot
//	rebooting, same   any             reboot again (the reboot did not happen)
//	boot id
//	rebooting, other  the image       health gate (the boot check waits for
//	boot id                           it), done
//	rebooting, other  another image   failed: the node stays out of the cluster
//	boot id
//	failed            any             failed again
//
// Where the pool signs its images (SignaturePolicy, --signature-policy-file:
// the node annotation's value), the switch is the daemon's: the policy
// merged into the base's policy.json, bootc switch
// --enforce-container-sigpolicy. An image it refuses, or a bootc that
// cannot enforce, fails the first boot: a new node never runs an image
// nobody verified.
//
// Done removes the first boot's copy of the pull secret (the daemon
// writes its own once the node runs) and records the image the node was
// installed with as the daemon's originalImage, where a pool without a
// MachineOSConfig takes it back to. A failure exits non-zero, so the
// kubelet, which requires the unit, never starts on the wrong image.
package firstboot
