package nodeconfig

import (
	"maps"
	"slices"
)

// extensionPackages maps an extension name of spec.extensions to the
// packages that provide it. The names and packages are those of the Machine
// Config Operator's SupportedExtensions() (pkg/controller/common/helpers.go,
// the RHCOS 9 list, with two-node-ha as its own e2e test TestExtensions
// expects it), so that an OpenShift user's MachineConfigs mean the same
// here. A name is not a package name: `ipsec` installs libreswan and its
// NetworkManager plugin, `sandboxed-containers` installs kata-containers.
var extensionPackages = map[string][]string{
	"two-node-ha":          {"pacemaker", "pcs", "fence-agents-all"},
	"wasm":                 {"crun-wasm"},
	"ipsec":                {"NetworkManager-libreswan", "libreswan"},
	"usbguard":             {"usbguard"},
	"kerberos":             {"krb5-workstation", "libkadm5"},
	"kernel-devel":         {"kernel-devel", "kernel-headers"},
	"sandboxed-containers": {"kata-containers"},
	"sysstat":              {"sysstat"},
}

// extensionNames is the sorted list of known extension names, for the
// error that refuses an unknown one.
var extensionNames = slices.Sorted(maps.Keys(extensionPackages))

// extensionNeedsDefaultKernel names the extensions whose packages match
// only the base image's own kernel: kernel-devel and kernel-headers are
// built for it, and modules built against them do not load into the
// realtime or 64k-pages kernel. The Machine Config Operator refuses the
// same combination when it merges a pool's MachineConfigs.
var extensionNeedsDefaultKernel = map[string]bool{"kernel-devel": true}

// packagesOf returns the packages of the given known extensions, sorted
// and without duplicates, so that the package step is the same whatever
// the order of the names.
func packagesOf(names []string) []string {
	var pkgs []string
	for _, n := range names {
		pkgs = append(pkgs, extensionPackages[n]...)
	}
	slices.Sort(pkgs)
	return slices.Compact(pkgs)
}
