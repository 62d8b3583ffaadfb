// Package bootstrap keeps what the config server (package configserver)
// needs and must not make itself, since it runs with read rights only:
//
//   - TokenReconciler: one bootstrap token Secret per pool,
//     strata-system/strata-bootstrap-<pool>, owned by the pool (deleted
//     with it). Deleting the Secret or annotating it with
//     machineconfiguration.strata.dev/rotate replaces the token: the
//     controller has no update right on Secrets in strata-system (they
//     hold the push secrets), so a rotation is a delete and a create.
//   - CertReconciler: the config server's serving certificate,
//     strata-config-server-tls, signed by a self-signed CA kept in
//     strata-config-server-ca (made once, ten years; pointer configs
//     carry it), renewed when two thirds of its year have passed, when
//     the CA changed, or when the names the server is reached by changed
//     (the Service's DNS names and IPs, and the names in its
//     machineconfiguration.strata.dev/server-names annotation).
package bootstrap
