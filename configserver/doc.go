// Package configserver serves a pool's first-boot Ignition to new nodes,
// as OpenShift's machine-config-server does, at /config/<pool>, over
// HTTPS, to callers that carry the pool's bootstrap token (a Secret per
// pool in strata-config-server, a namespace that holds nothing the server
// must not read, kept by controllers/bootstrap).
//
// What a new node gets (Render, pure): the pool's /var-bound files,
// directories, links and SSH keys (nothing else of the rendered config:
// the image carries the rest), the node pull secret where the first boot
// reads it, and, when the pool has an image, the unit
// strata-firstboot.service, which runs `strata-daemon firstboot` before
// kubelet.service: it switches to the pool's image by digest, reboots
// once, verifies the digest booted and the node's health, and only then
// lets the kubelet start (RequiredBy=kubelet.service), so the node is
// never registered, let alone schedulable, on its install image. A node
// installed with the pool's image does not reboot.
//
// The image is the pool's status.newNodes, which the rollout controller
// owns: the image it moves the pool's nodes to now, never one awaiting
// approval or one a halted rollout is stuck on.
//
// The server (Server) answers nothing without the pool's token: 401
// without an Authorization header, 403 with any token that is not the
// pool's (compared in constant time; an unknown pool answers the same, so
// pool names cannot be probed), 403 for a pool that takes no new nodes
// (no spec.bootstrapToken) whatever Secret there is, and 403 for a token
// past its lifetime: the current one rotationPeriod + rotationOverlap
// after it was made, the one a rotation replaced after the expiry
// written beside it. Every request is logged without its
// token and counted in strata_config_server_requests_total by result.
//
// It also serves running nodes (NodeServer, at /node/): a daemon reads
// its node's rendered configs and pull secret here rather than from the
// API server, because every daemon shares one ServiceAccount and RBAC
// cannot keep one node from reading another pool's. A request carries a
// token of the daemon's ServiceAccount for audience strata-config-server
// and bound to the daemon's pod, which a TokenReview turns into the Node
// the pod runs on; the server then serves the rendered configs that
// Node's desiredConfig or desiredStageConfig names or that are of its
// pool, and the pull secret its imagePullSecret names, the controller's
// annotations all three: anything else is 403, existing or not. The
// daemon trusts the server by the CA the controller publishes in the
// ConfigMap strata-config-server-ca (NodeClient).
package configserver
