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
// new content but the booted file's mode or owner, where the new image
// changed those too, is pinned forever.
//
// # Which tree is the source
//
// The staged deployment has two: usr/etc, the new image's pristine /etc,
// and etc, the deployment's own. The type, content, link target, mode
// and owner come from usr/etc, because equality with it in exactly those
// is what leaves no local modification after the merge. etc is not a
// stable source for them: on a real bootc host a staged deployment's etc
// is a copy of usr/etc until ostree-finalize-staged merges it at
// shutdown, while a plain `ostree admin deploy` (the test simulator's)
// merges at deploy time, and its etc then carries every live difference
// from the booted image, including an earlier live apply's own writes:
// taken from there, a second live apply before a reboot would write the
// first one's version back and pin it (TestSecondLiveApplyBeforeReboot).
// The xattrs come from etc where it has the path with the same type,
// because ostree labels etc for the /etc paths when it copies usr/etc,
// so its security.selinux is the right label for the live file; ostree
// ignores xattrs, so they cannot pin.
//
// So a live apply makes the paths it is given what the image has, as a
// reboot would for a node without local modifications. A node's own
// modification of one of them is overwritten (a reboot would have kept
// it); LocalModifications lists those beforehand for a caller that wants
// to keep them. The paths to give are those that differ between the
// image the live /etc follows (the booted one, or the last one applied
// live) and the staged one: ostree merges from the booted deployment, so
// a path an earlier live apply changed and the new image changes back
// must be written again.
//
// # Safety
//
// The host's /etc and the deployment directory are opened through
// rollout/hostfs (links followed only inside the host root and only where
// systemd-tmpfiles would follow them). Below them nothing follows a link:
// every lookup is openat2 with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS,
// so a link planted in /etc by whoever owns a directory there cannot send
// a write elsewhere, and a link in place of a parent directory is refused.
// A link at the path itself is replaced, never followed. A file is read
// only if, once opened (with O_NONBLOCK), it is a regular file of at most
// 64 MiB: a FIFO swapped in after the stat would block the daemon
// forever, a huge file exhaust its memory. Paths outside /etc, and /usr
// in particular (read-only, changed only by a new deployment), and a
// file of the image over that size are refused before anything is
// written.
//
// Each file is replaced atomically: a temporary file in the same
// directory, owner, mode and xattrs set on it, fsync, rename, fsync of
// the directory. Verify compares the live paths with the staged ones
// afterwards and names every difference.
package liveapply
