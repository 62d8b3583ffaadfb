// Package containerfile renders a pool's configuration (a rendered
// MachineConfig, planned by package nodeconfig, and a MachineOSConfig)
// into a reproducible Containerfile and build context: the Containerfile
// text, the configuration layer as a tar, and the two stages of the
// ConfigLayer strategy. What a configuration means, and whether it is
// valid, is nodeconfig's; this package only writes it out, and checks the
// MachineOSConfig's Containerfile content with buildkit's parser. It is
// pure: no Kubernetes client, no network.
//
// # What goes where
//
// The plan's files, directories, links and systemd units go into one
// layer, rootfs.tar, which the Containerfile ADDs: ADD unpacks a local tar
// with its modes and numeric owners (COPY would make everything root's).
// The tar is deterministic: entries sorted by path with hard links last,
// epoch times, no user or group names, no implicit parent directories (the
// base image's keep their modes).
//
// Every image's layer also carries what a managed node needs whatever
// its configuration (fixed.go): bootc-fetch-apply-updates.timer masked,
// as it would update and reboot the node without a drain, and the boot
// check of package rollout/bootcheck, enabled, which rolls the node back
// when no daemon reports it healthy. They win over the configuration's
// entries at the same paths.
//
// The plan's node items are not in the image; they are part of the
// Result, and of its input hash, for the daemon.
//
// Units of the base image to enable, and units to disable, become
// `systemctl enable/disable` in a RUN step; these steps come after the
// package steps, so that a unit an extension provides can be enabled.
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
//   - append: the plan's Edits are RUN steps that cat the fragments (bind
//     mounted from the context's append/ directory, so they never enter a
//     layer) onto the base image's file, creating it if needed.
//   - Owners: numeric ids go into the tar. Names only resolve inside the
//     image, so a RUN step chowns them after the layer is added.
//   - Extensions and kernelType become dnf steps.
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
