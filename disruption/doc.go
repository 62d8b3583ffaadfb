// Package disruption decides what a node's update costs it: a live apply
// (no drain, no reboot, perhaps a unit reloaded or restarted), a drain
// without a reboot, a soft reboot, or a full reboot. It is the node
// daemon's pure core for the cluster's node disruption policy
// (v1alpha1.MachineConfiguration): no client, no filesystem, inputs as
// values.
//
// Three steps, each a function:
//
//   - Merge puts the administrator's policy over Strata's Defaults, as
//     OpenShift's operator does (a policy for the same path or unit
//     replaces the default in place; others follow in their order), and
//     is what the MachineConfiguration's status shows and nodes follow.
//   - Compare lists what changed between two rendered configurations,
//     read through the configuration model (nodeconfig) the way the
//     renderer reads them: the image's files by path (content, mode,
//     owner, link target, appends), the files the daemon writes itself
//     (bound for /var), systemd units by name (contents, drop-ins,
//     enabled, mask), SSH keys, kernel arguments, kernel type,
//     extensions and osImageURL.
//   - Decide turns those changes, whether the image changed below the
//     configuration layer (a new base or admin stage, which the daemon
//     reads from the image's labels), whether bootc reports the staged
//     deployment soft-reboot capable, and the merged policy into a
//     Decision with a reason a person can read.
//
// The rules are written down where users read them, on the
// MachineConfiguration kind (api/v1alpha1); decide.go implements them
// and decide_test.go has a row for each.
//
// Where Strata departs from OpenShift's daemon, and why:
//
//   - A changed item no policy names takes a soft reboot where bootc can
//     do one, not a full reboot: a configuration-layer change leaves the
//     kernel, initramfs and kernel arguments alone, which is exactly what
//     a soft reboot keeps.
//   - Only /etc and /var are writable on a running bootc node, so a
//     changed image file elsewhere (under /usr) can never be applied
//     live, whatever a policy says.
//   - Content bound for /var is written by the daemon the same way with
//     or without a reboot (bootc never changes /var), so unless a policy
//     names it, it costs nothing; before policies existed, such a change
//     already took no drain and no reboot.
//   - Actions are run once each, DaemonReload first: OpenShift runs the
//     matched policies' actions in the order found, duplicates included,
//     and a daemon-reload after a restart leaves the restarted unit on its
//     old definition. A changed unit, or a file changed under
//     /etc/systemd/system, adds a DaemonReload, since systemd sees a
//     unit written live only after one.
package disruption
