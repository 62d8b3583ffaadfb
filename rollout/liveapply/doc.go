// Package liveapply writes changed /etc paths into a running host's /etc
// exactly as a staged deployment has them, so that a configuration change
// can take effect without a reboot and without becoming a local
// modification that ostree would keep over every later image (bootc issue
// 438; BOOTC.md "Live changes do not exist in bootc").
//
// # What "not pinned" takes
//
// At the next boot ostree merges /etc three ways: whatever differs
// between the booted deployment's /etc and its /usr/etc (the booted
// image's pristine /etc) is copied over the new deployment's /etc, and
// from then on `ostree admin config-diff` lists it and no image changes
// it again. ostree compares a file's type, content or link target, mode,
// uid and gid; it ignores xattrs (its merge and config-diff both pass
// OSTREE_DIFF_FLAGS_IGNORE_XATTRS, because SELinux labels of /etc and
// /usr/etc differ). A file written live is copied by that merge; the copy
// is not a local modification of the new deployment only if it equals
// the new image's /usr/etc file in all of those. A file written with the
// right content but the booted file's mode or owner is pinned forever.
//
// # Which tree is the source
//
// The staged deployment's etc/ is what the node is to run; its usr/etc/
// is the new image's pristine /etc. Apply takes each path from etc/ (its
// xattrs included: ostree labels etc/ for the /etc paths, so its
// security.selinux is the right one for the live file, not usr/etc's),
// and requires it to equal usr/etc/ in everything ostree compares. The
// two agree on a real bootc host, where a staged deployment's etc/ is a
// copy of usr/etc/ until ostree-finalize-staged merges it at shutdown.
// They differ where the deployment was merged at deploy time (a plain
// `ostree admin deploy`, as the test simulator does) and the node has a
// local modification of the path: then the path is pinned whatever
// happens, writing it live would only copy the pin, and Apply refuses it
// (*RefusedError) so that the caller takes the default disruption.
//
// # Safety
//
// The host's /etc and the deployment directory are opened through
// rollout/hostfs (links followed only inside the host root and only where
// systemd-tmpfiles would follow them). Below them nothing follows a link:
// every lookup is openat2 with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS,
// so a link planted in /etc by whoever owns a directory there cannot send
// a write elsewhere, and a link in place of a parent directory is refused.
// A link at the path itself is replaced, never followed. Paths outside
// /etc, and /usr in particular (read-only, changed only by a new
// deployment), are refused before anything is written.
//
// Each file is replaced atomically: a temporary file in the same
// directory, owner, mode and xattrs set on it, fsync, rename, fsync of
// the directory. Verify compares the live paths with the staged ones
// afterwards and names every difference.
package liveapply
