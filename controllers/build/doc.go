// Package build reconciles MachineOSConfigs: for a layered pool whose
// rendered configuration exists it makes the MachineOSBuild named
// <machineosconfig>-<hash of what makes the image>, builds it, follows it
// to Succeeded, Failed or Interrupted, and points the MachineOSConfig at
// the pushed image by digest.
//
// Two strategies (layer.go, run.go). ConfigLayer keeps the admin stage in
// the registry under a tag named by the hash of its own inputs (or takes
// the base itself), builds it in a Job (builder/job) only when it has none,
// and appends the configuration layer in the reconcile (builder/direct).
// SingleJob, and a configuration that needs a RUN step of its own, build
// everything in one Job.
//
// A tag is only where a stage is kept, never why it is trusted: whoever
// can push to the repository can move it. The MachineOSConfig's
// status.adminStages records the digest each admin stage Job pushed (from
// the current build's status, on every reconcile, so a lost write is made
// again), and a build reuses only that digest, while the registry has it.
// A tag naming another image is reported (a Warning Event, the stage's
// message) and not used. Garbage collection forgets a stage with its
// image, and the provenance names the stage by digest.
//
// The base image is pinned by digest in the MachineOSConfig's status and
// resolved again only on the configured interval or when the resolve-base
// annotation asks, so no unrelated event starts a build on a moved tag.
//
// Every image is annotated with its base (org.opencontainers.image.base.*)
// and Strata's labels. Once it is pushed, its SBOM and provenance are
// attached to it as OCI referrers with the push credentials (attach.go),
// and listed in the build's status, before the build is marked Succeeded:
// a registry that refuses them fails the build in its Attach stage, one
// that does not answer is tried again. Garbage collection deletes an
// image's referrers with it.
//
// A build of the same inputs that already succeeded, and whose image is
// still in the registry, is reused without a Job; if that build's image
// is the current one and the registry has lost it, the MachineOSConfig is
// Degraded (CurrentImageMissing) with an Event naming the image, and
// nothing is rebuilt until the rebuild annotation asks, since a rebuilt
// image would roll out to every node again. An older build's lost image
// is built again (a Warning Event says so). New inputs interrupt a
// running build. No build of the current inputs waits on one that ended:
// an interrupted build whose inputs become current again (a change
// reverted) is started again as a new attempt (status.attempt), a build
// whose Job someone deleted gets a new Job, and the builds of an earlier
// MachineOSConfig of the same name are deleted, not continued. A build's
// Job and the Secret of its inputs are deleted once its end is written. A
// failure leaves the previous image current, so nodes keep what they run,
// and says what failed on the MachineOSBuild, the MachineOSConfig and the
// pool (ImageBuildDegraded).
//
// A step that fails in a way that may heal by itself (a registry or the
// API server that did not answer) is tried again on the controller's own
// backoff (from half a second, doubling, up to maxRetryDelay), and the
// MachineOSConfig's Ready condition says what failed and when the next try
// is (reason Retrying); test/convergence checks, over random sequences of
// changes and failures, that the controller converges.
//
// A MachineOSConfig builds only for a pool it holds: it claims the pool
// (the layered-by annotation, first come) and layering.Holder, which the
// rollout controller reads too, says who holds it; another MachineOSConfig
// of the same pool reports PoolAlreadyLayered and builds nothing.
//
// Each reconcile changes the current build in memory and writes its status
// once, at its end, even when a step failed (writeBuildStatus), and then
// the MachineOSConfig's and the pool's, also when a step failed; what is
// said of a state change (Events, logs, metrics) is said only once that
// write succeeded.
package build
