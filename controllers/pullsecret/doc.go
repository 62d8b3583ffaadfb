// Package pullsecret keeps the node pull secrets where the node daemons
// can read them and nothing else.
//
// The daemons need the Secret each MachineOSConfig names in
// renderedImagePullSecret, to write it where bootc reads credentials. The
// Secrets a MachineOSConfig names live in the build namespace
// (strata-system) beside the push secrets, which can overwrite and delete
// images, and the build-context Secrets, which hold other pools' /etc:
// a daemon allowed to read Secrets there could read them all, and root on
// one node would then hold every pool's configuration and the fleet's
// push rights. So the daemons read nothing there. This controller copies
// each named pull secret into a namespace of the nodes' own
// (strata-nodes), where the daemons may get Secrets and nothing else, keeps
// each copy equal to its source, and deletes a copy that no
// MachineOSConfig names any more.
//
// A Secret that some MachineOSConfig pushes with is never copied, even if
// another names it as its pull secret: nodes must not hold push
// credentials (the admission policy strata-machineosconfig-secrets
// refuses one MachineOSConfig naming the same Secret for both).
//
// The reconciler's key is a Secret's name alone: the copy in the node
// namespace and its source in the build namespace share it.
package pullsecret
