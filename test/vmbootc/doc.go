// Package vmbootc is the bootc of the real-boot tier (issue 22): a small
// program of ours that does what bootc does, with what Debian 12 has
// (ostree 2022.7, no bootc package), on a really booted ostree system in
// a virtual machine. The daemon runs it as it runs bootc on a real node;
// the command is in the bootc subdirectory, a static binary that needs
// only ostree and coreutils in the guest.
//
// What it implements, as bootc 1.16 does it (and, for --download-only
// and --from-downloaded on switch, as bootc's main branch does):
//
//   - status --format=json (or --json): bootc's BootcHost document,
//     written with rollout/bootc's types, read from the real sysroot. The
//     booted deployment is the one whose directory is "/" (device and
//     inode, as ostree finds it), only when /run/ostree-booted exists;
//     the staged one is the deployment ostree names in
//     /run/ostree/staged-deployment (it has no boot loader entry until
//     ostree-finalize-staged writes one at shutdown), downloadOnly when
//     /run/ostree/staged-deployment-locked exists; rollback is the first
//     other deployment, queued when it comes before the booted one in the
//     boot loader order. The image reference comes from the deployment's
//     origin (container-image-reference), the digest from the image ref
//     (strata/image/<digest hex>) naming the deployed commit, the rest
//     from package ostreeimage's Lookup, cached per commit in /run (each
//     ostree run costs about a second in the emulated guest).
//     softRebootCapable is always false: Debian 12's systemd 252 has no
//     soft-reboot.
//   - switch [--transport registry] [--retain] [--download-only] IMAGE:
//     pull with go-containerregistry and the node's auth file (the first
//     of /run/ostree/auth.json, /etc/ostree/auth.json,
//     /usr/lib/ostree/auth.json), import into the sysroot's repository
//     with package ostreeimage (one commit per layer, reused: an image
//     derived from the booted one commits only its new layers), then
//     `ostree admin deploy --stage` with bootc's origin and bootc's
//     kernel-argument merge (ostreeimage.MergeKargs: the booted
//     deployment's arguments, less the booted image's kargs.d, plus the
//     new image's). Switching to the image the spec already names prints
//     "Image specification is unchanged." and exits 0 (with
//     --download-only it locks that staged deployment).
//   - switch --from-downloaded [IMAGE], upgrade --from-downloaded: unlock
//     the staged deployment (of IMAGE); upgrade --download-only: lock it.
//     upgrade has nothing else: this bootc switches by digest, so the
//     spec's image is always staged or booted already.
//   - rollback: the rollback deployment boots next; a staged deployment
//     is dropped (with its lock); run again, it reverts the queued
//     rollback.
//
// Locked staging (downloadonly.go): libostree 2022.7 does not finalize a
// staged deployment while /run/ostree/staged-deployment-locked exists,
// though its command line has no --lock-finalization, which does no more
// than create that file before staging. This bootc creates it before
// `ostree admin deploy --stage` too, so no unlocked staged deployment of
// the image ever exists; unlocking removes it. A locked staged deployment
// is not booted by any reboot; ostree drops it at the next boot, as for
// bootc. Seen in a real boot of the VM tier's disk: the lock made before
// the stage was still there after it, the reboot booted the deployment
// booted before, and after `bootc upgrade --from-downloaded` the next
// reboot booted the staged commit.
//
// What it does not implement, and so does not list in its help (the
// daemon reads the help to decide): --soft-reboot (no soft-reboot in
// systemd 252), --enforce-container-sigpolicy, --apply, upgrade without
// --download-only or --from-downloaded.
//
// Rollback with ostree 2022.7, which has no set-default: the command line
// can only add a deployment (first, or after the first) and remove one,
// never reorder. So rollback deploys the rollback deployment's commit
// again as the first deployment, with its origin and kernel arguments
// and with a copy of its /etc (not merged from the booted one:
// --no-merge, then the old /etc copied in with cp -a), and undeploys the
// old copy. The next boot is then exactly what the rollback deployment
// was, but it is a new deployment: its deploySerial and directory
// differ from the rollback's before, where bootc only reorders the boot
// loader entries. Reverting a queued rollback likewise removes the
// queued copy and adds the same commit back after the booted deployment.
//
// In the guest image (hack/vm builds it into strata/vm-base's top
// layer):
//
//	CGO_ENABLED=0 go build -trimpath -tags "$(cat hack/go-tags)" -ldflags "-s -w" \
//		-o ROOT/usr/bin/bootc ./test/vmbootc/bootc
//
// It needs ostree and ostree-boot (ostree-finalize-staged.path, enabled,
// finalizes the staged deployment at shutdown), cp from coreutils, an
// ostree-booted root with the physical root at /sysroot, writable (no
// sysroot.readonly in the repository's config), and the images it
// switches to in a registry the guest reaches, by digest.
//
// The parts that need a booted system sit behind System's fields, so
// that the host tests run the same code on a directory sysroot: Root is
// the directory taken as "/" (a deployment directory in tests), Run the
// directory taken as /run, and Live says whether ostree admin runs on
// the booted system (no --sysroot, deploy --stage) or on the directory
// (--sysroot=DIR, a plain deploy, with the staged deployment recorded in
// Run as ostree would).
package vmbootc
