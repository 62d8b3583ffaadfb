// Package job is the Job builder: it turns a rendered build
// (containerfile.Result) into a ConfigMap and a Kubernetes Job whose pod
// runs buildah, and reads a build's outcome back from the Job and its pods.
//
// The package is pure: Objects builds the objects, Interpret reads them;
// the build controller creates, watches and deletes them.
//
// # What the pod receives
//
// The ConfigMap (named JobName(build)) carries three keys:
//
//   - context.tar.gz (binaryData): the build context, always a gzipped tar
//     (containerfile.Result.WriteTar, gzip without name or time), so that
//     one code path serves small and large contexts alike and the same
//     build gives the same bytes. Objects refuses a context whose gzip
//     exceeds MaxContextBytes: a ConfigMap must stay under 1 MiB.
//   - steps: a map from buildah's step numbers to Containerfile lines (one
//     "stage step line" triple a line), so that a failed instruction is
//     reported with its line.
//   - build.sh: the build script (embedded in this package).
//
// Registry credentials never enter the ConfigMap, environment or
// arguments: the base image pull secret and the push secret are mounted
// as Secret volumes (their .dockerconfigjson key as auth.json) and only
// their paths are handed to buildah (--authfile). Registries listed in
// Config.InsecureRegistries are written into a registries.conf as
// insecure; every other registry is verified.
//
// # What the pod reports
//
// The script writes one JSON object to the container's termination
// message (TerminationMessage): the pushed digest on success, or the
// failing step, a message and the last lines of the build log on failure,
// under the kubelet's 4096-byte limit. The container's
// FallbackToLogsOnError policy gives the log tail when the script could
// not write it (killed, out of memory). Interpret turns that into a
// Status.
//
// A failure names its step: Prepare (inputs not delivered), PullBase,
// Auth (a registry answered 401/unauthorized/authentication required,
// pulling or pushing), Build (a Containerfile instruction, reported as
// "Containerfile line N: INSTRUCTION: error") or Push. Failures that
// retrying cannot fix (Prepare, Auth, Build) exit with ExitCodePermanent,
// and the Job's pod failure policy fails the Job at once instead of
// spending its backoff limit; pods disrupted by eviction or preemption do
// not count against it.
//
// # Privileges
//
// The build pod is privileged: buildah's chroot isolation still mounts
// /proc, /sys and bind mounts and unshares mount, UTS and IPC namespaces
// for each RUN, and pulls layers with device nodes and file owners of any
// uid; an unprivileged container's seccomp profile, masked /proc paths and
// missing CAP_SYS_ADMIN refuse those. The pod gets no service account
// token, since it never talks to the API server.
package job
