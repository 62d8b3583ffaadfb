// Package vm runs a real ostree-based system under QEMU for the VM tier's
// tests (issue 22, make test-vm): software emulation (tcg; KVM guests hang
// on these machines), GRUB as QEMU's -kernel reading ostree's
// /boot/loader/syslinux.cfg on every reset (so that a guest's reboot stays
// in one QEMU process and boots whatever ostree made the default), the disk
// as a copy-on-write overlay per VM, a config drive, and a user network
// restricted to the host's loopback ports the test names.
//
// What the harness sees of the guest is what the base image
// (hack/vm/base.sh) writes to its second serial port: a marker line when
// multi-user is reached, with the boot id and the booted deployment, and
// the output of the config drive's probe. The first serial port is the
// console, kept in the VM's log directory under .infra/vm/logs.
//
// A VM is always killed when its test ends, also when the test process
// dies (the parent-death signal). Tests that boot VMs run one at a time on
// the machine (flock /tmp/strata-vm.lock, as make test-vm does).
package vm
