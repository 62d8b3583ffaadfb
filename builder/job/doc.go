// Package job is the Job builder: it turns a rendered build
// (containerfile.Result) into a Secret and a Kubernetes Job whose pod
// runs buildah, and reads a build's outcome back from the Job and its pods.
//
// The package is pure: Objects builds the objects, Interpret reads them;
// the build controller creates, watches and deletes them.
//
// # What the pod receives
//
// The build Secret (named JobName(build), immutable, owned by the
// MachineOSBuild) carries three keys. It is a Secret, not a ConfigMap,
// because the context holds the configuration's /etc files.
//
//   - context.tar.gz: the build context, always a gzipped tar
//     (containerfile.Result.WriteTar, gzip without name or time), so that
//     one code path serves small and large contexts alike and the same
//     build gives the same bytes. Objects refuses a context whose gzip
//     exceeds MaxContextBytes: a Secret must stay under 1 MiB.
//   - steps: a map from buildah's step numbers to Containerfile lines (one
//     "stage step line" triple a line), so that a failed instruction is
//     reported with its line.
//   - build.sh: the build script (embedded in this package).
//
// The pod runs three containers of the builder image (Debian with
// buildah, skopeo and jq), one after the other, each a phase of build.sh.
// The pull and build containers share buildah's image storage on an
// emptyDir; the build and push containers share only an OCI layout on
// another:
//
//   - pull (init container) pulls the images the Containerfile's FROMs
//     name (BaseImages) with the base image pull secret. It runs no user
//     code.
//   - build (init container) builds the Containerfile with
//     `buildah bud --pull=never`, so every base comes from the storage,
//     and gives the image the rendered build's manifest annotations
//     (Result.Annotations, in the container's environment), then writes
//     it as an OCI layout (`buildah push oci:`). It mounts no registry
//     credentials: the admin's RUN steps and package scriptlets run
//     here. Images that COPY --from or RUN --mount name, other than a
//     stage, are not pulled and fail the build.
//   - push (the pod's container) checks the layout and copies it as it
//     is to the registry with the push secret (`skopeo copy
//     --preserve-digests`), and reports its digest. It runs no user code,
//     mounts no buildah storage and the layout read-only, and starts only
//     after the build container, and every process it left, ended.
//
// A RUN step that escapes buildah's chroot (see Privileges) can rewrite
// whatever the build container mounts. buildah's storage is not made to
// be read safely after that: its metadata and links could make a buildah
// that holds the push secret read that secret into a layer, or worse.
// The layout is plain data and is checked before anything reads it: only
// regular files and directories (no link can lead the push elsewhere),
// an index.json that parses and names one OCI image manifest by digest,
// every blob's content matching the digest it is named by, and every
// blob the manifest names present with its size. What the registry
// reports having is compared with that digest. A layout the build
// replaced with another image that passes the checks is no more than a
// RUN step can make anyway.
//
// Registry credentials never enter the build Secret, an environment or
// arguments: each registry Secret is mounted as a volume (its
// .dockerconfigjson key as auth.json) in the one container that uses it,
// and only its path is handed to buildah or skopeo. Each container has
// its own scratch emptyDir for its configuration, log and temporary
// files. Registries listed in Config.InsecureRegistries are written into
// a registries.conf as insecure; every other registry is verified.
//
// # Resources
//
// Every container gets CPU, memory and ephemeral-storage requests and
// limits: Placement.Resources, and DefaultResources for what it leaves
// unset. Every emptyDir has a size limit (VolumeSizeLimits, defaults
// DefaultVolumeSizeLimits), past which the kubelet evicts the pod, so a
// build that fills its disk fails with the kubelet's reason instead of
// filling the node's. The ephemeral-storage limit, unless configured, is
// the volumes' limits together plus 1 GiB: the kubelet counts a pod's
// emptyDirs against it, and a smaller one would evict the pod before any
// volume reached its own limit.
//
// # What the pod reports
//
// A failing container writes one JSON object to its termination message
// (TerminationMessage): the failing step, a message and the last lines of
// its log, under the kubelet's 4096-byte limit; the push container writes
// the pushed digest. FallbackToLogsOnError gives the log tail when the
// script could not write it (killed, out of memory). Interpret reads the
// report of whichever container failed, init containers included, and
// the push container's digest.
//
// A failure names its step: Prepare (inputs not delivered), PullBase
// ("Containerfile line N: FROM image: error"), Auth (a registry answered
// 401/unauthorized/authentication required, pulling or pushing), Build (a
// Containerfile instruction, reported as "Containerfile line N:
// INSTRUCTION: error") or Push. Failures that retrying cannot fix
// (Prepare, Auth, Build) exit with ExitCodePermanent, and the Job's pod
// failure policy, which holds for every container, fails the Job at once
// instead of spending its backoff limit; pods disrupted by eviction or
// preemption do not count against it.
//
// # Placement
//
// Build pods get a required node affinity that keeps them off
// control-plane nodes (node-role.kubernetes.io/control-plane
// DoesNotExist), unless Placement.Affinity has a nodeAffinity of its own.
//
// # Privileges
//
// No container is privileged, may gain privileges (allowPrivilegeEscalation
// false) or write its own file system (readOnlyRootFilesystem; buildah's
// lock directory is moved to the scratch directory). The pull and build
// containers, which run buildah, drop every capability but SETUID, SETGID
// and SETFCAP, and run without a seccomp profile (Unconfined). The push
// container, the one that holds the push secret, runs skopeo alone (an
// OCI layout to a registry: no namespace, no mount): it drops every
// capability and runs under the runtime's default seccomp profile
// (RuntimeDefault). The pod gets no service account token, since it
// never talks to the API server.
//
// This was measured on the test cluster (Linux 6.18, cgroup v1, no
// AppArmor, containerd 1.6.20 with runc 1.1.5, buildah 1.28.2 in the
// builder image) by building a Debian base (device nodes, setuid files,
// files of other groups) and a base with a file capability, with a RUN
// step that chowns, chmods and searches for the credentials:
//
//   - buildah as root without CAP_SYS_ADMIN runs itself in a user
//     namespace it makes, in every phase. The runtime's default seccomp
//     profile refuses unshare(CLONE_NEWUSER) without CAP_SYS_ADMIN, so
//     every container fails under it ("Error during
//     unshare(CLONE_NEWUSER): Operation not permitted").
//   - Without a seccomp profile, SETUID, SETGID and SETFCAP are all the
//     pull and build containers need: buildah writes the user namespace's whole
//     uid_map and gid_map, 0 included, and without any one of them that
//     write fails. Owners, modes, setuid bits, device nodes and file
//     capabilities come out as with a privileged pod (the base's layers
//     regenerate with the same digests).
//   - The other way that works keeps the default seccomp profile but gives
//     the build container CAP_SYS_ADMIN, MKNOD and the eleven capabilities
//     buildah gives RUN steps (CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL,
//     NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT;
//     without any of them a RUN step fails); the pull container then
//     needs CAP_SYS_ADMIN too.
//     CAP_SYS_ADMIN in the host's user namespace
//     lets a process that gets hold of it mount file systems, on a cgroup
//     v1 host the way out of the container; the seccomp profile is the
//     smaller loss. A Localhost profile that adds the user namespace
//     calls to the default one would narrow it, but must be installed on
//     every node.
//   - AppArmor, whose default container profile denies mount(2), was not
//     measured: the test host has none.
//
// # User namespaces
//
// Config.HostUsers false sets the pods' hostUsers: false, so that root in
// the pod is an unprivileged user of the node. It is left unset by
// default because the test cluster cannot run such a pod: measured there
// (kubelet 1.37.1, containerd 1.6.20, Linux 6.18), a pod with hostUsers:
// false never starts; the kubelet reports FailedCreatePodSandBox "can't
// set spec.hostUsers: false, runtime does not support user namespaces"
// and the pod stays Pending without a sandbox; Interpret fails such a
// build once StartGrace has passed, instead of waiting out its deadline.
// Pod user namespaces need containerd 2.0 or later (or CRI-O 1.25 or
// later) and a kernel with idmapped mounts for the pod's volumes.
// Whether buildah's own user namespace works inside the pod's (it maps
// what the pod's namespace has, 65536 IDs) was not measured, for want of
// such a runtime here.
//
// RUN steps keep the capabilities buildah gives them, among them
// SYS_CHROOT, with which a step can leave buildah's chroot (chroot(2),
// not pivot_root) and read the build container's own files and mounts:
// which is why no credential is mounted there.
package job
