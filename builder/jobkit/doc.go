// Package jobkit is the one skeleton of the builder's Jobs, the build Job
// (builder/job) and the boot disk Job (builder/diskjob): it makes a
// batch/v1 Job of one pod owned by a MachineOSBuild, and reads such a Job
// and its pods back into a Status. What the pod runs, and what its
// succeeded pod reports, are each Job's own; everything else is here, so
// that both Jobs are placed, secured, retried and read the same way.
//
// Like its users it is pure: NewJob builds, Follow reads; the build
// controller creates, watches and deletes the Jobs.
//
// # The Job
//
// NewJob makes a Job of one completion, retried up to its backoff limit
// and bounded by a deadline. A container that exits with
// ExitCodePermanent fails the Job at once (its pod failure policy), since
// it would fail the same way again; a pod disrupted by eviction or
// preemption does not count against the backoff limit. The pod never
// restarts a container, gets no service account token and no service
// links, stays off control-plane nodes and runs on a node of the
// configured architecture (Placement). Each container keeps its root file
// system read-only, may not gain privileges and drops every capability
// but those it names (SecurityContext), and reports in its termination
// message, falling back to its log's tail when it could not write one.
// Registry credentials are mounted as files readable by their owner only
// (AuthFile), never put in an environment or an argument.
//
// # Following a Job
//
// Follow reads, in this order: a succeeded pod (the newest), whose report
// the Job's Success reads, before the Job controller marks the Job
// complete; a Job complete without such a pod, which failed; a failed Job
// (or one about to fail), explained by its condition (deadline, backoff
// limit, pod failure policy) and the termination message of its newest
// failed pod's failed container, init containers included; otherwise a
// pending or running Job, failed early when a pod cannot start: at once
// for an image that cannot be pulled, after StartGrace for a pod the
// scheduler cannot place or the runtime makes no sandbox for. Every
// failure it reports fits the API's limits (BoundFailure).
package jobkit
