// Package bootstrap keeps what the config server (package configserver)
// needs and must not make itself, since it runs with read rights only,
// in the namespace strata-config-server, which holds nothing else: the
// server may read Secrets there and nowhere in strata-system.
//
//   - TokenReconciler: one bootstrap token Secret per pool,
//     strata-config-server/strata-bootstrap-<pool>, owned by the pool
//     (a cluster-scoped owner of a namespaced Secret: the garbage
//     collector deletes it with the pool). Deleting the Secret or
//     annotating it with machineconfiguration.strata.dev/rotate
//     replaces the token: the controller may only create and delete
//     these Secrets, so a rotation is a delete and a create.
//   - CertReconciler: the config server's serving certificate,
//     strata-config-server/strata-config-server-tls, signed by a
//     self-signed CA kept in strata-system/strata-config-server-ca, out
//     of the config server's reach (made once, ten years; pointer configs
//     carry it), renewed when two thirds of its year have passed, when
//     the CA changed, or when the names the server is reached by changed
//     (the Service's DNS names and IPs, and the names in its
//     machineconfiguration.strata.dev/server-names annotation).
package bootstrap
