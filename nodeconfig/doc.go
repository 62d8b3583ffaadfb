// Package nodeconfig is the configuration model: what a MachineConfig
// means, apart from how an image is built from it. It parses and
// translates Ignition, validates MachineConfigs (the one validator),
// plans a configuration into what the image carries and what the node
// daemon writes itself (node items), and summarises a configuration for
// the SBOM. The renderer (package containerfile), the render and rollout
// controllers, machineconfig, sbom and the node daemon import it; it
// imports none of them, and no Containerfile parser, so the daemon links
// without buildkit. It is pure: no Kubernetes client, no network.
//
// # One validator
//
// ParseIgnition parses any Ignition 3.0 to 3.5 config into 3.5 types, and
// translates 2.0 to 2.4 configs to them as OpenShift does (ign22.go). It
// refuses keys Ignition does not know, which it would ignore with their
// values, naming the key and the version, and any other warning of
// Ignition's that is not known to be harmless (refuseWarnings). Two
// Ignition 2.x leftovers that hold nothing, `filesystem: root` on a file,
// directory or link and an empty networkd, are accepted as OpenShift
// accepts them, and Warnings names them.
// ValidateMachineConfigSpec returns every problem the renderer would
// refuse, as field errors (spec.config.storage.files[3].path: Invalid
// value: "/proc/x": ...). BuildPlan, which the renderer and SplitForNode
// use, runs the same code, so a config the render controller accepts is
// a config the builder can render, and the other way round. Refused:
// remote sources (anything but data: URLs, so that builds reproduce
// offline), Ignition config merge/replace and CA lists, disks, raid,
// filesystems and luks, paths that are relative, unclean, contain "..",
// or are under /proc, /sys, /dev, /run, /tmp, /boot, /sysroot, /ostree,
// /usr/etc, /var/run (a link to /run) or /var/lib/strata (the daemon's
// own state; the daemon checks every item again with CheckNodePath),
// kernel arguments with control characters or an unclosed
// double quote, kernel arguments that boot out of the normal system
// (init=, rd.break, systemd.unit=, the rescue and emergency runlevels;
// kargs.go has the list and why) and more than MaxKernelArgumentsBytes of
// them in one config, extension names OpenShift does not know,
// kernelArguments.shouldNotExist (an image can add kernel arguments, not
// remove the base image's), any change to users or groups (below), and
// file contents and appends that, decoded, add up to more than
// MaxContentSize in one config (limits.go): decoding stops at the entry
// that passes it, which the error names.
//
// # What goes where
//
// A Plan holds the image's files, directories, links and systemd units as
// Entries (the renderer writes them as one tar layer), the appends to
// files of the base image (Edits), the owners only the image can resolve
// (Chowns), the units only the image can enable or disable, the kernel
// arguments, the extensions' packages and the kernel type.
//
// Content under /var, /home, /root, /srv, /opt, /mnt, /media and /usr/local
// is never baked: bootc does not change /var on a switch, so it is planned
// as NodeItems for the daemon to write. So are the SSH keys of users.
// SplitForNode gives the daemon its share of a rendered config.
//
// Kernel arguments (spec.kernelArguments in order, each entry split at
// spaces outside double quotes as OpenShift's daemon splits it, then
// Ignition's kernelArguments.shouldExist not already present, one argument
// each) are planned as /usr/lib/bootc/kargs.d/10-strata.toml.
//
// Units are planned in /etc/systemd/system, drop-ins in NAME.d/. For an
// enabled unit whose contents are in the config, the links `systemctl
// enable` would make are computed from its [Install] section and its
// drop-ins' (WantedBy, RequiredBy, UpheldBy, Alias, Also, DefaultInstance
// for templates); a unit without [Install] is a no-op, as with systemctl.
// A masked unit is a link to /dev/null. A unit of the base image (no
// contents) that is enabled, and any unit that is disabled, with or without
// contents, needs `systemctl enable/disable` in a build step (Plan.Enable,
// Plan.Disable), since only the image knows its [Install] section and the
// links its base made.
//
// # Decisions
//
//   - Users and groups: only `name` and `sshAuthorizedKeys` of a user are
//     accepted; the keys become a NodeItem. Creating users or groups,
//     password hashes and every other user field are refused: an image is
//     readable by anyone who can pull it, so it must not carry password
//     hashes, and /etc/passwd is merged per machine. Users belong in a
//     sysusers.d file or the MachineOSConfig's containerFile.
//   - append: a file with contents and appends is complete at plan time.
//     A file with appends and no contents appends to the base image's file,
//     which only the build can see: it is an Edit. A file with neither is
//     created empty if the base has none, and otherwise left alone.
//   - overwrite: an image is always rebuilt from the base, so a baked file
//     replaces what the base has, whatever overwrite says (as the Machine
//     Config Operator does); whether the base has the file cannot be known
//     at render time. For /var-bound items overwrite is passed on to the
//     daemon, which can look. A /var-bound file with contents and no
//     overwrite is overwritten, although Ignition's default is false:
//     OpenShift's merge sets an unset overwrite to true and its daemon
//     rewrites its files on every update, so an updated script reaches
//     nodes that have the old one. An explicit `overwrite: false` still
//     leaves an existing, different file alone. Files without contents
//     (appends only), directories and links keep Ignition's default.
//   - Owners: numeric ids go into the entries. Names only resolve inside
//     the image, so they become Chowns.
//   - Hard links must point to a file of the same config in the same place
//     (both in the image or both bound for /var).
//   - Extensions: spec.extensions holds OpenShift's extension names (ipsec,
//     sandboxed-containers, ...), each planned as the packages the Machine
//     Config Operator installs for it; the package list is sorted and
//     deduplicated. kernel-devel is refused with a realtime or 64k-pages
//     kernel, as OpenShift refuses it.
package nodeconfig
