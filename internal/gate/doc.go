// Package gate evaluates a MachineConfigPool's rollout gates: the checks
// the rollout controller makes before it takes a node (spec.gates).
//
// Three kinds, each failing closed: a gate that cannot be evaluated holds
// the rollout just as one that fails, and its message says why.
//
//   - prometheus: firing alerts, filtered by name and labels, or a PromQL
//     query that must return no series, asked of a Prometheus server
//     through its HTTP API (/api/v1/alerts, /api/v1/query), with an
//     optional CA bundle and bearer token read from strata-system. The
//     token is sent and nothing else: no message or error carries it.
//   - cel: one object, named by apiVersion, kind, name and namespace, read
//     uncached and given to a CEL expression as `object`; true passes.
//   - blockingPods: a node running a pod that matches a label selector
//     (and namespace selector) is not taken; the other nodes are.
//
// The first two hold the whole pool; the last holds single nodes. The
// package reads the cluster through a client.Reader and Prometheus over
// HTTP; the rollout controller turns its Verdicts into the pool's
// conditions. Validate checks what can be checked without the cluster
// (regular expressions, CEL, selectors) and names the field at fault.
package gate
