// Package builder holds the image builders: the Job builder runs buildah in
// a Kubernetes Job on the cluster.
package builder
