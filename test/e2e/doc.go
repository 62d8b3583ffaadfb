// Package e2e is Strata's end-to-end suite. It runs against the real
// one-node cluster that hack/cluster/up.sh starts on the test machine
// (etcd, kube-apiserver, controller-manager, scheduler, kubelet,
// containerd, and the registry on 127.0.0.1:5000) and is built only with
// the e2e build tag:
//
//	make test-e2e
//
// which starts the cluster, runs `go test -tags e2e ./e2e/...` and always
// tears the cluster down again, leaving the host as it was.
package e2e
