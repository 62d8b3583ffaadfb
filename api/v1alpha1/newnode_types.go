package v1alpha1

import "time"

// NewNodeStatus is what a node that joins a pool now starts from: the
// config server (strata-controller config-server) serves it in the
// pool's first-boot Ignition. The rollout controller writes it, as the
// one owner of the pool's target.
type NewNodeStatus struct {
	// image is the image a new node switches to at its first boot, before
	// its kubelet starts, as repository@sha256:<digest>: the image the
	// rollout moves the pool's nodes to now. It is not updated while the
	// pool waits for a build or an approval or is paused: new nodes then
	// get the image released before. A halted rollout gives them the
	// image most of the pool's nodes not on the failed one run. Empty: the
	// pool runs each node's own image (no MachineOSConfig and no
	// osImageURL), so a new node keeps the image it was installed with.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// config is the rendered MachineConfig whose /var-bound files,
	// directories, links and SSH keys a new node gets at its first boot.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Config string `json:"config,omitempty"`
}

// Names the config server, its bootstrap tokens and its serving
// certificate share with the controller and stratactl.
const (
	// ConfigServerNamespace holds what the config server reads of its
	// own: the bootstrap tokens and its serving certificate. It is not
	// strata-system, whose push and build Secrets the server must never
	// be able to read (RBAC cannot grant Secrets by label).
	ConfigServerNamespace = "strata-config-server"
	// BootstrapTokenSecretPrefix starts the name of a pool's bootstrap
	// token Secret in strata-config-server: strata-bootstrap-<pool>. A request
	// for the pool's Ignition must carry its token.
	BootstrapTokenSecretPrefix = "strata-bootstrap-"
	// BootstrapTokenKey is the key of the token in that Secret.
	BootstrapTokenKey = "token"
	// PreviousBootstrapTokenKey is the key, in the same Secret, of the
	// token the current one replaced by rotation; it works until
	// PreviousTokenExpiresAnnotation (the pool's
	// bootstrapToken.rotationOverlap after the rotation), then the config
	// server refuses it.
	PreviousBootstrapTokenKey = "previous-token"
	// PreviousTokenExpiresAnnotation on a bootstrap token Secret is when
	// its previous token stops working, in RFC 3339.
	PreviousTokenExpiresAnnotation = Prefix + "previous-token-expires"
	// RotateTokenAnnotation on a bootstrap token Secret makes the
	// controller replace the token, the replaced one working on for the
	// pool's bootstrapToken.rotationOverlap; deleting the Secret replaces
	// it at once, with no overlap. Nodes not yet booted need a new pointer
	// config (stratactl node-config).
	RotateTokenAnnotation = Prefix + "rotate"
	// BootstrapTokenLabel marks a bootstrap token Secret; its value is
	// the pool's name.
	BootstrapTokenLabel = Prefix + "bootstrap-token-for"

	// ConfigServerTLSSecret is the config server's serving certificate
	// (kubernetes.io/tls, with ca.crt) in strata-config-server, kept by
	// the controller unless the server is given a Secret of the user's.
	ConfigServerTLSSecret = "strata-config-server-tls"
	// ConfigServerCASecret holds the self-signed CA that signs it
	// (ca.crt, ca.key); it stays in strata-system, out of the config
	// server's reach: the server needs its certificate, not the CA's key.
	ConfigServerCASecret = "strata-config-server-ca"
	// ConfigServerPathPrefix is the path of a pool's Ignition:
	// /config/<pool>, as OpenShift's machine-config-server serves it.
	ConfigServerPathPrefix = "/config/"
)

// BootstrapTokenSecretName is the name of pool's bootstrap token Secret.
func BootstrapTokenSecretName(pool string) string { return BootstrapTokenSecretPrefix + pool }

// DefaultRotationOverlap is a bootstrap token's rotationOverlap when the
// pool sets none.
const DefaultRotationOverlap = time.Hour

// Overlap is how long a token replaced by rotation keeps working: the
// rotationOverlap, or its default, which stays below the rotationPeriod.
func (b *BootstrapToken) Overlap() time.Duration {
	if b.RotationOverlap != nil {
		return b.RotationOverlap.Duration
	}
	if b.RotationPeriod != nil && b.RotationPeriod.Duration < 2*DefaultRotationOverlap {
		return b.RotationPeriod.Duration / 2
	}
	return DefaultRotationOverlap
}

// Expiry is when a token made at issued stops working: never (the zero
// time) without a rotationPeriod, else rotationPeriod + overlap later.
// The controller replaces it at rotationPeriod; the config server
// refuses it after Expiry whether or not it was replaced.
func (b *BootstrapToken) Expiry(issued time.Time) time.Time {
	if b.RotationPeriod == nil {
		return time.Time{}
	}
	return issued.Add(b.RotationPeriod.Duration + b.Overlap())
}
