// Package sbom writes the SPDX 2.3 JSON document of what Strata added to
// a node image: every file, directory and link of the configuration layer
// with its digest, mode and owner, the systemd units the configuration
// enables, disables or masks, and the kernel arguments. The image is the
// document's described package and descends from its base image, so that
// a registry's scanner can tell the base's findings from Strata's layer.
//
// The admin stage (the MachineOSConfig's Containerfile content,
// extensions) is not listed: its files are whatever its commands made,
// and a scanner reads them from the image itself like the base's.
//
// The same input gives the same bytes: the creation time is the Unix
// epoch, as the builds' --timestamp 0, and every list is sorted.
package sbom
