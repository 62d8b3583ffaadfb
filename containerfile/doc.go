// Package containerfile renders a pool's configuration (a rendered
// MachineConfig and a MachineOSConfig) into a reproducible Containerfile and
// build context. It is pure: no Kubernetes client, no network.
//
// # One validator
//
// ParseIgnition parses any Ignition 3.0 to 3.5 config into 3.5 types, and
// translates 2.0 to 2.4 configs to them as OpenShift does (ign22.go). It
// refuses keys Ignition does not know, which it would ignore with their
// values, naming the key and the version, and any other warning of
// Ignition's that is not known to be harmless (refuseWarnings).
// ValidateMachineConfigSpec returns every problem Render would refuse, as
// field errors (spec.config.storage.files[3].path: Invalid value: "/proc/x":
// ...). Render builds its plan with the same code, so a config the render
// controller accepts is a config the builder can render, and the other way
// round. Refused: remote sources (anything but data: URLs, so that builds
// reproduce offline), Ignition config merge/replace and CA lists, disks,
// raid, filesystems and luks, paths that are relative, unclean, contain
// "..", or are under /proc, /sys, /dev, /run, /tmp, /boot, /sysroot, /ostree
// or /usr/etc, kernel arguments with control characters or an unclosed
// double quote, extension names OpenShift does not know,
// kernelArguments.shouldNotExist (an image can add kernel arguments, not
// remove the base image's), any change to users or groups (below), and
// file contents and appends that, decoded, add up to more than
// MaxContentSize in one config (limits.go): decoding stops at the entry
// that passes it, which the error names.
//
// # What goes where
//
// Files, directories, links and systemd units go into one layer, rootfs.tar,
// which the Containerfile ADDs: ADD unpacks a local tar with its modes and
// numeric owners (COPY would make everything root's). The tar is
// deterministic: entries sorted by path with hard links last, epoch times,
// no user or group names, no implicit parent directories (the base image's
// keep their modes).
//
// Content under /var, /home, /root, /srv, /opt, /mnt, /media and /usr/local
// is never baked: bootc does not change /var on a switch, so it is returned
// as NodeItems for the daemon to write. So are the SSH keys of users.
//
// Kernel arguments (spec.kernelArguments in order, each entry split at
// spaces outside double quotes as OpenShift's daemon splits it, then
// Ignition's kernelArguments.shouldExist not already present, one argument
// each) are written to /usr/lib/bootc/kargs.d/10-strata.toml.
//
// Units are written to /etc/systemd/system, drop-ins to NAME.d/. For an
// enabled unit whose contents are in the config, the links `systemctl
// enable` would make are computed from its [Install] section and its
// drop-ins' (WantedBy, RequiredBy, UpheldBy, Alias, Also, DefaultInstance
// for templates); a unit without [Install] is a no-op, as with systemctl.
// A masked unit is a link to /dev/null. A unit of the base image (no
// contents) that is enabled, and any unit that is disabled, with or without
// contents, needs `systemctl enable/disable` in a RUN step, since only the
// image knows its [Install] section and the links its base made; these
// steps come after the package steps, so that a unit an extension provides
// can be enabled.
//
// # Two ways to build one image
//
// Result is the single-Job build: one Containerfile adds the configuration
// layer, its RUN steps, the packages and then the MachineOSConfig's
// content. Result.Stages is the same configuration as the ConfigLayer
// strategy builds it: an admin stage (FROM the base, the kernel type, the
// extensions and the MachineOSConfig's content; nil when that is the base
// unchanged), whose input hash moves only with those, and the
// configuration as one tar layer for the controller to append. The layer
// is rootfs.tar: the parent directories the configuration does not declare
// depend on the admin stage (a base's 0700 directory stays 0700 in a
// build, and an entry under a symlinked directory lands where the link
// points), which a pure render cannot see; the builder that appends the
// layer adds them from the stage (builder/direct). What only a
// RUN step can do (appends to base files, owners by name, enabling or
// disabling units of the base image) cannot be a layer: Stages.NeedsJob
// says what, and such a configuration is built by the single Job.
//
// # Decisions
//
//   - Users and groups: only `name` and `sshAuthorizedKeys` of a user are
//     accepted; the keys become a NodeItem. Creating users or groups,
//     password hashes and every other user field are refused: an image is
//     readable by anyone who can pull it, so it must not carry password
//     hashes, and /etc/passwd is merged per machine. Users belong in a
//     sysusers.d file or the MachineOSConfig's containerFile.
//   - append: a file with contents and appends is complete at render time.
//     A file with appends and no contents appends to the base image's file,
//     which only the build can see: a RUN step cats the fragments (bind
//     mounted from the context's append/ directory, so they never enter a
//     layer) onto the file, creating it if needed. A file with neither is
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
//   - Owners: numeric ids go into the tar. Names only resolve inside the
//     image, so a RUN step chowns them after the layer is added.
//   - Hard links must point to a file of the same config in the same place
//     (both in the image or both bound for /var).
//   - Extensions and kernelType become dnf steps. spec.extensions holds
//     OpenShift's extension names (ipsec, sandboxed-containers, ...), each
//     installing the packages the Machine Config Operator installs for it;
//     the package list is sorted and deduplicated. kernel-devel is refused
//     with a realtime or 64k-pages kernel, as OpenShift refuses it.
//   - The admin's Containerfile content for the target architecture (else
//     the NoArch entry) is parsed with buildkit's parser, must not contain
//     FROM, and comes after Strata's steps; the labels come last, so that it
//     cannot override them.
//   - Result.NeedsRun is true when the Containerfile has any RUN step (the
//     cases above, or the admin's RUN): such a build needs a builder that
//     runs commands, not just one that appends a layer.
//   - The input hash is a sha256 over a length-prefixed encoding of the
//     format version, the architecture, the Containerfile (without the hash
//     label), every context file and the node items: it is order-free
//     where the inputs are, and changes with anything that changes the
//     build or what the node gets.
package containerfile
