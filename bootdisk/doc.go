// Package bootdisk makes a raw disk image from a bootable container image
// (bootc's layout): an unpartitioned ext4 file system holding an ostree
// sysroot with the image deployed, as `bootc install` would leave a disk.
//
// It is the first disk of a node that boots for real (the VM tier's
// harness, test/vm) and the boot disk a MachineOSBuild publishes for new
// nodes (issue 22). Everything happens in a directory and ends in
// `mkfs.ext4 -d`, so it needs neither loop devices nor mounts, only the
// host's ostree and e2fsprogs:
//
//   - the image is imported into the sysroot's repository the way bootc's
//     import does (one commit per layer, merged), so that a later switch to
//     an image derived from it fetches and commits only its new layers;
//   - it is deployed into the stateroot "default" with the kernel
//     arguments root=/dev/vda rw console=ttyS0, then the image's own
//     (usr/lib/bootc/kargs.d) and the caller's, and bootc's origin file
//     naming the image by digest, so that `bootc status` on the booted
//     disk reports the image and its digest;
//   - the bootloader configuration is ostree's syslinux file,
//     /boot/loader/syslinux.cfg, which ostree keeps current at every later
//     deployment: a bootloader that reads it (extlinux, or GRUB's
//     syslinux_source, as the VM tier uses) boots whatever ostree made the
//     default, rollbacks included.
package bootdisk
