// Package gate evaluates a MachineConfigPool's rollout gates: the checks
// the rollout controller makes before it takes a node (spec.gates).
//
// Three kinds, each failing closed: a gate that cannot be evaluated holds
// the rollout just as one that fails, and its message says why.
//
//   - prometheus: firing alerts, filtered by name and labels, or a PromQL
//     query that must return no series, asked of a Prometheus server
//     through its HTTP API (/api/v1/alerts, /api/v1/query), with an
//     optional CA bundle and bearer token read from strata-system, by the
//     controller, from Secrets an admin labelled for gates only
//     (v1alpha1.GateCredentialsLabel). The token is sent over https only,
//     and nothing else carries it: no message, detail or log.
//   - cel: one object, named by apiVersion, kind, name and namespace, read
//     uncached as the gate identity and given to a CEL expression as
//     `object`; true passes. A Secret is refused.
//   - blockingPods: a node running a pod that matches a label selector
//     (and namespace selector) is not taken; the other nodes are. An empty
//     selector, which would list every pod, is refused.
//
// The first two hold the whole pool; the last holds single nodes.
//
// Whoever may write a pool writes its gates, so a gate must not become a
// way to read what its author may not. The package reads the cluster
// through Evaluator.Reader, which strata-controller makes impersonate the
// gate identity (ServiceAccount, NewReader): it reads only what the
// shipped RBAC and an admin grant it, never a Secret. A Verdict's message,
// which goes to the pool's status and Events, names the gate, what it
// read and the kind of failure (forbidden, not found, timed out, an
// evaluation error), never an error's text that may quote a value; the
// detail of API and HTTP errors goes to the controller's log only.
// Check bounds all of a pool's gates by one budget, so that slow gates
// delay a reconcile by that much at most.
//
// The rollout controller turns Verdicts into the pool's conditions.
// Validate checks what can be checked without the cluster (regular
// expressions, CEL, selectors, a token's scheme, a Secret kind) and names
// the field at fault.
package gate
