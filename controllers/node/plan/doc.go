// Package plan decides which nodes of a MachineConfigPool the rollout
// controller sends the pool's target to next, and what the pool's status
// counts and flags are.
//
// It is a pure function of what the controller observed (the pool's
// settings, its target and each node's annotations) with no client, so
// that a decision depends on nothing but the state of the world: after a
// restart the controller plans the same again, and whole rollouts can be
// replayed tick by tick and reviewed as golden files (testdata/*.golden).
// The controller gathers the inputs, writes the actions as node
// annotations and turns the Result into conditions.
//
// Three choices shape the plan, after the Machine Config Operator:
//
//   - A node that is unavailable anyway (NotReady, mid-update, Degraded) is
//     re-targeted without consuming maxUnavailable: that cannot make more
//     of the pool unavailable, and it is how a failed node or one stuck on
//     an old target is brought along.
//   - A halt belongs to a target: maxFailedNodes counts only nodes that
//     failed the current target, so a new target (a fix, or deleting the
//     MachineOSConfig to roll back) restarts a halted rollout and takes the
//     failed nodes again. A node is never sent the pair it failed twice:
//     the daemon would not retry it.
//   - A node selected by several pools belongs to none: no pool can know
//     which target is right for it, so it is reported and never touched.
//
// Two more choose which nodes move when (canary.go, stageAhead):
//
//   - A canary (the first Count nodes by name, or those a selector
//     picks) takes a new target first; then the pool soaks from the
//     first plan that sees every canary node on the target (the caller
//     records that time in the pool's status and passes it back, since
//     the planner keeps nothing); then the rest. Until the soak ends one
//     failure on the target halts, as maxFailedNodes does.
//   - Stage ahead: the next StageAhead available nodes in turn that are
//     not taken are asked to download the target's image ahead, locked.
//     Nodes holding it staged, then those asked, come first in turn, so
//     the set stays the same from one plan to the next and a download
//     once started is used; at most maxUnavailable + StageAhead nodes
//     download at once.
package plan
