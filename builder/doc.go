// Package builder holds the image builders: the Job builder (builder/job)
// runs buildah in a Kubernetes Job on the cluster; the direct builder
// (builder/direct) appends a configuration layer to an image in the
// registry without pulling it.
package builder
