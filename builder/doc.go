// Package builder holds the image builders: the Job builder (builder/job)
// runs buildah in a Kubernetes Job on the cluster; the direct builder
// (builder/direct) appends a configuration layer to an image in the
// registry without pulling it. The boot disk Job (builder/diskjob) makes
// a built image's raw disk; it and the build Job are both made and read
// by one Job skeleton (builder/jobkit).
package builder
