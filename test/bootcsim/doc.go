// Package bootcsim simulates bootc (image-mode Linux) on a directory, so
// that the Strata daemon and the end-to-end suite can update "nodes" that
// are plain directories on one machine. The bootc-sim command in the
// bootc-sim subdirectory is its command line: the daemon runs it in place
// of bootc. A switch with --enforce-container-sigpolicy has its image's
// signatures evaluated by containers/image in bootc-sim-sigpolicy, a
// helper installed beside bootc-sim (package sigverify in process), so
// that bootc-sim, run at every step of an update, does not link it. As
// in bootc, the verification is part of the image reference: the
// deployment records it (bootc's ostree-image-signed:, here a line in
// the simulator's origin group), status reports the reference's
// signature as "containerPolicy", a switch with the option to the spec
// staged without it is a new spec (it verifies, rather than "Image
// specification is unchanged."), an upgrade of a verified spec verifies
// again, and --from-downloaded verifies nothing.
//
// Only the boot is simulated. Images are really pulled from a registry
// (go-containerregistry, with the node's ostree auth file), imported into
// the node's ostree repository layer by layer as bootc imports them
// (package ostreeimage; a dummy kernel, initramfs and os-release are
// merged onto an image that has none, in the image's own commit when its
// layers show it has none), and every node has a real ostree
// sysroot (the ostree command line tool), so the /etc three-way merge, the
// shared /var and the immutable deployment directories are ostree's own. A node directory looks like this:
//
//	sysroot/                 the ostree sysroot, stateroot "strata"
//	var  -> sysroot/ostree/deploy/strata/var
//	etc  -> the booted deployment's etc (moved at each simulated boot)
//	usr  -> the booted deployment's usr
//	home, root, srv, opt, mnt, media -> var/home, var/roothome, var/srv, ...
//	run/                     emptied at each simulated boot, as a tmpfs is
//	.bootc-sim/state.json    what the simulator recorded (booted deployment,
//	                         image metadata, images marked failing)
//	.bootc-sim/boot_id       a new random UUID at each simulated boot
//	run/nextroot             a prepared soft reboot's target deployment
//
// How the bootc states map onto ostree: the order of the deployments is
// ostree's (its boot loader entries), index 0 being the next boot.
// "Booted" is the deployment the simulator recorded at its last simulated
// boot. "Staged" is a deployment written by Switch and not booted yet; it
// carries a marker in its origin file, as ostree keeps a staged flag for a
// real staged deployment. "Rollback" is the first other deployment, and a
// rollback is queued when it comes before the booted one.
//
// Switch deploys with `ostree admin deploy` (not --stage, which needs a
// booted ostree system), so ostree merges /etc at once, from the booted
// deployment. Reboot then finalizes the staged deployment as ostree does at
// shutdown: it deploys the same commit again, with the same kernel
// arguments and origin, so that the three-way merge takes the booted /etc
// as it is at the reboot, and drops the first copy. A download-only
// (finalization locked) staged deployment carries a second marker; no
// reboot finalizes it, and like ostree the simulator then drops it. A
// crash (power loss) finalizes nothing. --from-downloaded removes the
// marker.
//
// Soft reboot: a deployment is soft-reboot capable when its boot loader
// entry names the booted one's kernel and initramfs (ostree's bootcsum)
// and it has the same kernel arguments less those of the images'
// kargs.d, which bootc 1.16 does not compare (bootc issue 1350), and
// neither it nor the booted one has NoSoftRebootFile (a systemd without
// soft-reboot).
// --soft-reboot prepares run/nextroot, --apply leaves a soft-reboot
// request, and the soft reboot finalizes the staged deployment, boots it
// with the same boot id and counts it in the state (systemd's
// SoftRebootsCount, which a full boot resets). "sim systemctl" answers
// `systemctl show -p SoftRebootsCount` from it.
//
// Each node runs one bootc release (sim bootc-version): 1.16.9, whose
// switch refuses --download-only as clap refuses an unknown argument and
// whose help does not list it, or main, whose switch has it. The booted deployment's
// serial therefore differs from the serial the staged one showed.
//
// The deployment order is changed (Rollback) by rewriting the version
// lines of the boot loader entries, which is what ostree itself reads the
// order from; ostree 2022.7 has no set-default command.
//
// Kernel arguments live where ostree keeps them, in the boot loader
// entries' options, and are computed as bootc computes them: the booted
// deployment's arguments, less the old image's usr/lib/bootc/kargs.d
// arguments the new image no longer has, plus the new image's new ones.
package bootcsim
