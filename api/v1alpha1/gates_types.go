package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RolloutGate is one check the rollout controller makes before it takes a
// node of the pool. Exactly one of prometheus, cel and blockingPods is
// set. A gate that cannot be evaluated (Prometheus unreachable, an object
// missing or forbidden, an expression that does not compile or fails)
// holds the rollout, as one that fails does: gates fail closed.
//
// A gate can read no more than an admin granted for gates: cel and
// blockingPods gates read the cluster as the ServiceAccount
// strata-system/strata-gates, which the controller impersonates, and
// whose RBAC (config/rbac/gate_reader_role.yaml) lets it list pods and
// namespaces and get nothing else until an admin grants a kind; it can
// read no Secret. The pool's Updated condition and its HeldByGate Events
// name the gate, what it read and the kind of failure (forbidden, not
// found, timed out, evaluation error), never a value read from an object
// nor an error's text that may quote one. All of a pool's gates together
// take at most 10 s per check; a gate not done by then holds the pool as
// "timed out", and does not delay other pools.
// +kubebuilder:validation:XValidation:rule="[has(self.prometheus), has(self.cel), has(self.blockingPods)].filter(x, x).size() == 1",message="exactly one of prometheus, cel and blockingPods must be set"
type RolloutGate struct {
	// name identifies the gate in the pool's conditions and Events.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// prometheus holds the rollout while alerts fire or a query returns
	// something.
	// +optional
	Prometheus *PrometheusGate `json:"prometheus,omitempty"`

	// cel holds the rollout while an expression over an object is not
	// true.
	// +optional
	CEL *CELGate `json:"cel,omitempty"`

	// blockingPods keeps a node from being taken while a matching pod
	// runs on it; other nodes of the pool are still taken.
	// +optional
	BlockingPods *BlockingPodsGate `json:"blockingPods,omitempty"`
}

// PrometheusGate asks a Prometheus server, through its HTTP API, whether
// the rollout may go on: exactly one of alerts and query is set.
// +kubebuilder:validation:XValidation:rule="has(self.alerts) != has(self.query)",message="exactly one of alerts and query must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.bearerTokenSecret) || (isURL(self.url) && url(self.url).getScheme() == 'https')",message="a bearer token is sent only over https: url must be https when bearerTokenSecret is set",fieldPath=".url"
type PrometheusGate struct {
	// url is the Prometheus server's base URL, such as
	// https://prometheus.monitoring:9090; the gate calls /api/v1/alerts or
	// /api/v1/query under it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'http' || url(self).getScheme() == 'https')",message="url must be an http or https URL"
	URL string `json:"url"`

	// alerts holds the rollout while a firing alert matches (pending
	// alerts do not count).
	// +optional
	Alerts *AlertFilter `json:"alerts,omitempty"`

	// query is a PromQL instant query that must return an empty result
	// (no series) for the rollout to go on, such as
	// `up{job="ceph"} == 0`. A scalar or string result holds the rollout.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query,omitempty"`

	// ca is the PEM bundle that verifies the server's certificate, from a
	// ConfigMap or a Secret in strata-system (a Secret only if labelled
	// machineconfiguration.strata.dev/gate-credentials=true); without it
	// the system's roots are used.
	// +optional
	CA *CABundleSource `json:"ca,omitempty"`

	// bearerTokenSecret is the key of a Secret in strata-system whose value
	// is sent as `Authorization: Bearer`. Only a Secret an admin labelled
	// machineconfiguration.strata.dev/gate-credentials=true is read (any
	// other is refused as if missing), and only to an https url: a gate
	// with a token and an http url is invalid and holds the pool. The
	// token is never logged nor shown in status or Events.
	// +optional
	BearerTokenSecret *corev1.SecretKeySelector `json:"bearerTokenSecret,omitempty"`
}

// AlertFilter selects the alerts that hold a rollout: firing alerts whose
// name matches nameRegexp, does not match ignoreNameRegexp, and that carry
// every label in labels.
type AlertFilter struct {
	// nameRegexp is an RE2 expression the whole alert name must match.
	// Empty: every alert.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	NameRegexp string `json:"nameRegexp,omitempty"`

	// ignoreNameRegexp is an RE2 expression; alerts whose whole name
	// matches it never hold the rollout (kured's --alert-filter-regexp).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	IgnoreNameRegexp string `json:"ignoreNameRegexp,omitempty"`

	// labels an alert must carry, each with exactly this value.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Labels map[string]string `json:"labels,omitempty"`
}

// CABundleSource names a key holding PEM certificates, in a ConfigMap or a
// Secret of strata-system: exactly one is set.
// +kubebuilder:validation:XValidation:rule="has(self.configMapKeyRef) != has(self.secretKeyRef)",message="exactly one of configMapKeyRef and secretKeyRef must be set"
type CABundleSource struct {
	// configMapKeyRef is a key of a ConfigMap in strata-system.
	// +optional
	ConfigMapKeyRef *corev1.ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`

	// secretKeyRef is a key of a Secret in strata-system labelled
	// machineconfiguration.strata.dev/gate-credentials=true.
	// +optional
	SecretKeyRef *corev1.SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// CELGate reads one object and evaluates a CEL expression over it, as
// `object`; the rollout goes on only while the expression is true. The
// object is read as the gate identity (strata-system/strata-gates), which
// an admin grants get on the kind with a ClusterRole labelled
// machineconfiguration.strata.dev/aggregate-to-gate-reader=true: see the
// README ("Gates"). A Secret is never read: a gate over one is invalid.
// When the expression fails, the pool's status says only the kind of
// error (a missing key, say), not the error's text, which could quote
// the object's data.
// +kubebuilder:validation:XValidation:rule="!(self.apiVersion == 'v1' && self.kind.lowerAscii() == 'secret')",message="a CEL gate may not read a Secret",fieldPath=".kind"
type CELGate struct {
	// apiVersion is the object's group and version, such as
	// ceph.rook.io/v1, or v1 for the core group.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	APIVersion string `json:"apiVersion"`

	// kind is the object's kind, such as CephCluster. Secret (of the core
	// group) is refused.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// name is the object's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace is the object's namespace; empty for a cluster-scoped
	// object.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// expression is a CEL expression over `object` (the whole object, as
	// its JSON) that must evaluate to a bool, such as
	// `object.status.ceph.health == "HEALTH_OK"`. A missing field is an
	// error, and holds the rollout; guard with has() where a field may be
	// absent.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// BlockingPodsGate keeps a node from being taken while a pod that matches
// runs on it (a pod bound to the node that has not finished), like kured's
// --blocking-pod-selector.
// +kubebuilder:validation:XValidation:rule="(has(self.podSelector.matchLabels) && size(self.podSelector.matchLabels) > 0) || (has(self.podSelector.matchExpressions) && size(self.podSelector.matchExpressions) > 0)",message="podSelector must not be empty: it would select every pod of the cluster",fieldPath=".podSelector"
type BlockingPodsGate struct {
	// podSelector selects the blocking pods by label. It must not be
	// empty: a selector of every pod is refused, and holds the pool.
	// +required
	PodSelector metav1.LabelSelector `json:"podSelector"`

	// namespaceSelector restricts the pods to namespaces whose labels
	// match. Absent: pods in every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// GateCredentialsLabel, with the value "true", marks a Secret in
// strata-system that Prometheus gates may read (bearerTokenSecret,
// ca.secretKeyRef). The controller reads no other Secret for a gate: an
// admin labels the Secrets meant for gates, and a pool's author can name
// no other (a signing key, a push secret).
const GateCredentialsLabel = Prefix + "gate-credentials"
