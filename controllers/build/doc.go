// Package build reconciles MachineOSConfigs: for a layered pool whose
// rendered configuration exists it makes the MachineOSBuild named
// <machineosconfig>-<hash of every input>, runs it as a Job (builder/job),
// follows it to Succeeded, Failed or Interrupted, and points the
// MachineOSConfig at the pushed image by digest.
//
// A build of the same inputs that already succeeded, and whose image is
// still in the registry, is reused without a Job. New inputs interrupt a
// running build. A failure leaves the previous image current, so nodes keep
// what they run, and says what failed on the MachineOSBuild, the
// MachineOSConfig and the pool (ImageBuildDegraded).
package build
