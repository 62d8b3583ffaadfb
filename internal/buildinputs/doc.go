// Package buildinputs is what a MachineOSBuild is made from, as a pure
// function of its sources (the MachineOSConfig's spec, the pool's
// rendered MachineConfig and the pinned base image), and the names that
// follow from it: the build's name is the MachineOSConfig's and the hash
// of its inputs, so that the same inputs find the same build.
//
// Both build reconcilers use it: the MachineOSConfig's, to name the build
// the current inputs call for, and the MachineOSBuild's, to make it. It
// reads no API object and calls no registry, and it imports no
// controller, so that the controllers' tests can use it too.
package buildinputs
