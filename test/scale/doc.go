// Package scale holds the scale test of Strata's controllers: one manager
// runs the render, build and rollout reconcilers as strata-controller
// wires them, over 100 layered pools and 1,000 Nodes, and the test counts
// what a single change costs (reconciles per controller and API requests
// by verb and resource). It has no code besides the test.
package scale
