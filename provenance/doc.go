// Package provenance writes the provenance of a node image Strata built:
// an in-toto Statement v1 whose predicate is SLSA Provenance v1, naming
// the image as its subject, the build's inputs (the base image by digest,
// the admin stage image by digest when the image was layered on one, the
// rendered MachineConfig, the MachineOSConfig and its generation, the
// digest of the Containerfile) and the builder. The same input gives the
// same bytes: there is no time or invocation id in it.
package provenance
