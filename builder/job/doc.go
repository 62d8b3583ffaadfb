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
// The pod runs three containers of the builder image, one after the
// other, each a phase of build.sh, sharing buildah's image storage on an
// emptyDir:
//
//   - pull (init container) pulls the images the Containerfile's FROMs
//     name (BaseImages) with the base image pull secret. It runs no user
//     code.
//   - build (init container) builds the Containerfile with
//     `buildah bud --pull=never`, so every base comes from the storage. It
//     mounts no registry credentials: the admin's RUN steps and package
//     scriptlets run here. Images that COPY --from or RUN --mount name,
//     other than a stage, are not pulled and fail the build.
//   - push (the pod's container) pushes the built image with the push
//     secret and reports its digest. It runs no user code, and starts
//     only after the build container, and every process it left, ended.
//
// Registry credentials never enter the build Secret, an environment or
// arguments: each registry Secret is mounted as a volume (its
// .dockerconfigjson key as auth.json) in the one container that uses it,
// and only its path is handed to buildah (--authfile). Each container has
// its own scratch emptyDir for buildah's configuration, log and temporary
// files, so the push reads nothing the build wrote but the storage and the
// built image's ID, which it checks. Registries listed in
// Config.InsecureRegistries are written into a registries.conf as
// insecure; every other registry is verified.
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
// # Privileges
//
// The build pod's containers are privileged: buildah's chroot isolation
// still mounts /proc, /sys and bind mounts and unshares mount, UTS and IPC
// namespaces for each RUN, and pulls layers with device nodes and file
// owners of any uid; an unprivileged container's seccomp profile, masked
// /proc paths and missing CAP_SYS_ADMIN refuse those. The pod gets no
// service account token, since it never talks to the API server.
package job
