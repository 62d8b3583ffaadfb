// Package machineosbuild reconciles MachineOSBuilds: it takes one build
// of one set of inputs through its phases, and is the only writer of a
// MachineOSBuild's status and of its Jobs and their Secrets. Which build
// the pool's current inputs call for, and when a build is made, stopped
// or deleted, is the MachineOSConfig reconciler's (controllers/build).
//
// Each reconcile runs the phases below in order over one scope, each a
// function that returns at once when its part is done or not due; the
// first error stops the sequence, and the build's status is written once,
// in a deferred patch, on every path, so a step being retried says so:
//
//	stop       the MachineOSConfig asked the build to stop (the
//	           interrupt annotation): its Jobs go, it ends Interrupted
//	inputs     the MachineOSConfig, the rendered config, the pinned base;
//	           a build whose inputs are not the MachineOSConfig's (any
//	           longer, or not yet: a pin not written yet) waits
//	restart    an Interrupted build whose inputs are current again starts
//	           a new attempt (status.attempt)
//	prepare    the first status: Prepared, on the base it is built on
//	run        the admin stage or the whole image in a Job (builder/job),
//	           the configuration layer (builder/direct), the SBOM and
//	           provenance (builder/attest): Succeeded or Failed
//	sign       a succeeded image, once approved when approval is asked
//	bootdisk   a succeeded image's boot disk, in a Job (builder/diskjob)
//	sweep      a build whose end is written keeps no build Job or Secret
//
// The build's inputs are recomputed here from the same sources the
// MachineOSConfig reconciler uses (internal/buildinputs), and a build
// runs only while their hash is the one in its name: a MachineOSConfig
// changed since the build was made never has it built from a mix.
//
// Who writes what: this reconciler writes every field of a
// MachineOSBuild's status except the ImageApproved condition (an
// approver's); the MachineOSConfig reconciler writes the MachineOSConfig's
// status, the pool's ImageBuildDegraded condition and claim, and a
// MachineOSBuild's metadata (its creation, the interrupt annotation, its
// deletion with its Jobs by DeleteBuild).
//
// What is said of a state change (Events, logs, metrics) is said only
// once the status saying it is written: a reconcile whose write lost a
// conflict does it all again and must not say it twice.
package machineosbuild
