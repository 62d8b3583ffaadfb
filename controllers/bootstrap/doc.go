// Package bootstrap keeps what the config server (package configserver)
// needs and must not make itself, since it runs with read rights only,
// in the namespace strata-config-server, which holds nothing else: the
// server may read Secrets there and nowhere in strata-system.
//
//   - TokenReconciler: one bootstrap token Secret for each pool that
//     takes new nodes (spec.bootstrapToken),
//     strata-config-server/strata-bootstrap-<pool>, owned by the pool
//     (a cluster-scoped owner of a namespaced Secret: the garbage
//     collector deletes it with the pool); a pool without
//     spec.bootstrapToken has none, and a token it had is deleted.
//     The token is replaced when it is rotationPeriod old, or when its
//     Secret is annotated with machineconfiguration.strata.dev/rotate;
//     the replaced token moves to the new Secret's previous-token, with
//     the time it stops working (rotationOverlap later, never past its
//     own rotationPeriod + rotationOverlap) in an annotation the config
//     server enforces. Deleting the Secret replaces the token with no
//     overlap. The controller may only create and delete these Secrets,
//     so a rotation is a delete and a create (and an expired previous
//     token stays in the Secret, refused, until the next rotation).
//   - CertReconciler: the config server's serving certificate,
//     strata-config-server/strata-config-server-tls, signed by a
//     self-signed CA kept in strata-system/strata-config-server-ca, out
//     of the config server's reach (made once, ten years; pointer configs
//     carry it), renewed when two thirds of its year have passed, when
//     the CA changed, or when the names the server is reached by changed
//     (the Service's DNS names and IPs, and the names in its
//     machineconfiguration.strata.dev/server-names annotation).
package bootstrap
