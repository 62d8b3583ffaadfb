// Package build reconciles MachineOSConfigs: for a layered pool whose
// rendered configuration exists it computes the current inputs (the
// MachineOSConfig's spec, the pinned base image and the pool's rendered
// MachineConfig; internal/buildinputs), makes the MachineOSBuild named
// <machineosconfig>-<hash of those inputs> when there is none, and points
// the MachineOSConfig at its image, by digest, once it succeeded. Each
// build is taken through its phases (Jobs, configuration layer, SBOM and
// provenance, signature, boot disk) by the MachineOSBuild reconciler,
// controllers/machineosbuild, which SetupWithManager registers with this
// one, as cluster-api's MachineDeployment and MachineSet controllers.
//
// Who writes what. This reconciler writes the MachineOSConfig's status
// (conditions, currentImagePullSpec, machineOSBuild, baseImage,
// adminStages, observedGeneration), the pool's claim (the layered-by
// annotation) and its ImageBuildDegraded condition (its share,
// poolstatus.Build), and a MachineOSBuild's existence and metadata: it
// creates it, asks it to stop with the interrupt annotation and takes that
// back, and deletes it with its Jobs (machineosbuild.DeleteBuild). The
// MachineOSBuild reconciler writes every field of a build's status but
// the ImageApproved condition, which is an approver's, and owns the Jobs
// and their Secrets.
//
// New inputs interrupt a running build: this reconciler annotates it,
// and the MachineOSBuild reconciler deletes its Job and marks it
// Interrupted. No build of the current inputs waits on one that ended: an
// interrupted build whose inputs become current again (a change reverted)
// has the annotation taken off and is started again as a new attempt
// (status.attempt); a build whose Job someone deleted gets a new Job; and
// the builds of an earlier MachineOSConfig of the same name are deleted,
// not continued. A build's Job and the Secret of its inputs are deleted
// once its end is written. A failure leaves the previous image current,
// so nodes keep what they run, and says what failed on the
// MachineOSBuild, the MachineOSConfig and the pool (ImageBuildDegraded).
//
// The base image is pinned by digest in the MachineOSConfig's status and
// resolved again only on the configured interval or when the resolve-base
// annotation asks, so no unrelated event starts a build on a moved tag;
// with spec.baseImageVerification a resolved base must be signed by one
// of its keys (verifybase.go).
//
// A tag is only where an admin stage is kept, never why it is trusted:
// whoever can push to the repository can move it. status.adminStages
// records the digest each admin stage Job pushed (from the current
// build's status, on every reconcile, so a lost write is made again), and
// a build reuses only that digest, while the registry has it. Garbage
// collection forgets a stage with its image.
//
// A build of the same inputs that already succeeded, and whose image is
// still in the registry, is reused; if that build's image is the current
// one and the registry has lost it, the MachineOSConfig is Degraded
// (CurrentImageMissing) with an Event naming the image, and nothing is
// rebuilt until the rebuild annotation asks, since a rebuilt image would
// roll out to every node again. An older build's lost image is built
// again (a Warning Event says so). Garbage collection deletes finished
// builds beyond the history with their images and the images' referrers,
// sparing every image the MachineOSConfig or a node names.
//
// A step that fails in a way that may heal by itself (a registry or the
// API server that did not answer) is tried again on the controller's own
// backoff (from half a second, doubling, up to maxRetryDelay), and the
// MachineOSConfig's Ready condition says what failed and when the next try
// is (reason Retrying); test/convergence checks, over random sequences of
// changes and failures, that the two reconcilers converge.
//
// A MachineOSConfig builds only for a pool it holds: it claims the pool
// (the layered-by annotation, first come) and layering.Holder, which the
// rollout controller reads too, says who holds it; another MachineOSConfig
// of the same pool reports PoolAlreadyLayered and builds nothing.
//
// Each reconcile writes the MachineOSConfig's status once, in a deferred
// write that also runs when a step failed, and then the pool's condition.
package build
