// Package diskjob is the boot disk Job: it turns a succeeded build's image
// into a Kubernetes Job whose pod makes a raw disk of that image and
// publishes it beside the image (cmd/strata-bootdisk), and reads the
// outcome back from the Job and its pod. Like builder/job it is pure:
// Objects builds the Job, Interpret reads it; the build controller
// creates, watches and deletes it.
//
// # Why a Job of its own, after the push
//
// The disk is made from the image as pushed, by digest, once the build
// succeeded. It cannot be a step of the build Job: with the ConfigLayer
// strategy (the default) the image is finished in the controller, with
// no Job at all, and the build Job, when there is one, pushes an image
// the controller still attaches to. It cannot run in the controller
// either: it needs ostree and e2fsprogs, root to keep the image's file
// owners, gigabytes of scratch space and minutes of CPU, none of which a
// controller should hold. A Job per disk is retried, bounded by a
// deadline, placed like build pods (Config.Placement), and its failure
// never holds up the image's rollout: the build is Succeeded already, and
// only its BootDisk condition waits.
//
// # The pod
//
// One container of the boot disk image (Config.Image: Debian with ostree
// and e2fsprogs, and strata-bootdisk) runs strata-bootdisk with the
// image by digest, the disk's size and the authfile path as arguments:
// it pulls the image, makes the disk under WorkDir (an emptyDir bounded by
// WorkLimit), compresses it beside it and attaches it to the image as an
// OCI artifact, and writes a Report to its termination message.
//
// It reads and writes the registry with the MachineOSConfig's push secret,
// mounted as a volume (its .dockerconfigjson as auth.json), never in an
// environment variable or an argument: the image is in the push
// repository, and the artifact goes there. The pod runs no code of the
// image's: ostree and mkfs.ext4 read its files as data. It gets no
// service account token, and its root file system is read-only.
//
// It runs as root, because the disk must keep the owners and modes of the
// image's files (ostree's bare repository mode stores them as the files'
// own), with only the capabilities that takes (Capabilities), measured by
// running strata-bootdisk under setpriv with that bounding set on an image
// with files of other users, setuid and setgid files and directories only
// their owner reads (cmd/strata-bootdisk's TestPodCapabilities):
//
//   - CHOWN: without it unpacking the image fails (files of other owners);
//   - DAC_READ_SEARCH: without it ostree cannot read a directory only its
//     owner may (DAC_OVERRIDE is not needed besides it);
//   - FOWNER: without it ostree's commit fails (fchmod of a file root no
//     longer owns);
//   - FSETID: without it a setgid file of another group silently loses
//     its setgid bit;
//   - SETFCAP: file capabilities in the image (security.capability, as
//     Fedora's ping and newuidmap have), which only it may set; not
//     measured here.
//
// LINUX_IMMUTABLE is left out: ostree's immutable bit on the deployment
// root is not carried into the disk by mkfs.ext4 -d, and ostree goes on
// without it. The pod needs no user namespace, so the runtime's default
// seccomp profile stays.
//
// # What the pod reports
//
// Report is one JSON object in the termination message: the artifact and
// the disk's sizes and raw digest on success; on failure a step, a message
// and the log's last lines, as the build pod's (job.TerminationMessage),
// so that jobkit.Follow explains a failed pod, a deadline or an image
// that cannot be pulled the same way for both Jobs.
package diskjob
