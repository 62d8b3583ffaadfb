// Package disruption keeps the MachineConfiguration's status: the node
// disruption policy nodes follow, which is Strata's defaults merged with
// the administrator's spec.nodeDisruptionPolicy (package disruption at the
// repository root holds the merge and the decision it feeds). It writes
// status.nodeDisruptionPolicyStatus, observedGeneration and the
// NodeDisruptionPolicyMerged condition, and nothing else: it creates no
// MachineConfiguration (without one, nodes follow the defaults) and no
// other object.
//
// The merge happens here rather than on each node so that the policy in
// effect is one fact, visible with kubectl, and every node follows the
// same one: a node uses the status only when its observedGeneration is
// the object's generation, as OpenShift's daemon does.
package disruption
