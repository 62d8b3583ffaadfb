// Package memory holds the memory bound of the controller's build path:
// four builds of the worst configuration Strata accepts, run at once as
// the build controller runs them (validate the MachineConfig, render it,
// append the configuration layer to a base in a real registry and push
// it, make its SBOM), in a child process whose peak RSS the test reads
// from the kernel. TestFourWorstBuildsStayUnderBound asserts the bound;
// BenchmarkPeakRSS (make bench-memory) prints the figures. It has no code
// besides the tests.
package memory
