package v1alpha1

// PEMPublicKey is one public key in PEM form ("-----BEGIN PUBLIC
// KEY-----"), as `cosign generate-key-pair` and `skopeo
// generate-sigstore-key` write it.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=4096
// +kubebuilder:validation:XValidation:rule="self.contains('-----BEGIN PUBLIC KEY-----')",message="must be a PEM public key (-----BEGIN PUBLIC KEY-----)"
type PEMPublicKey string

// ImageSigning makes the controller sign the images it publishes and the
// pool's nodes refuse any image of the push repository that is not
// signed by a trusted key, on every path by which an image reaches a
// node: the update's switch, a download ahead of it (the pool's
// stageAhead; a node whose bootc cannot verify a download-only switch
// does not stage ahead, and says so in a NotStagedAhead Event), a new
// node's first boot, and a rollback, which goes only to the image the
// node ran before the update. bootc verifies each
// (--enforce-container-sigpolicy); a node whose bootc cannot switches to
// none of the pool's images. The repository is matched as
// containers/image normalises image names (docker.io/library/os for a
// push spec of os or docker.io/os).
type ImageSigning struct {
	// keySecret names the Secret in strata-system that holds the sigstore
	// private key: key cosign.key (the encrypted PEM private key) and key
	// cosign.password (its passphrase), as `cosign generate-key-pair
	// k8s://strata-system/NAME` makes it. The controller signs every image
	// it publishes with it, and with imageApproval Required only once the
	// image is approved, so that a signature means "approved". The key is
	// never logged nor copied anywhere.
	// +required
	KeySecret LocalObjectReference `json:"keySecret"`

	// publicKeys are the public keys the pool's nodes accept: an image of
	// renderedImagePushSpec's repository boots only with a signature by
	// one of them. The signing key's public key must be one of them. Two
	// during a key rotation (see the README). The nodes' policy.json is
	// the base image's with the repository's requirement added: the
	// base's default and its requirements for other repositories still
	// apply to podman and CRI-O; for the push repository these keys
	// replace whatever the base required. A base policy.json that cannot
	// be parsed stops the node's switch with an error naming it.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	PublicKeys []PEMPublicKey `json:"publicKeys"`
}

// BaseImageVerification makes the build controller verify the base
// image's signature before it builds on it.
type BaseImageVerification struct {
	// publicKeys are the public keys a base image must be signed by (one
	// of them; sigstore signatures as containers/image reads them). A base
	// whose tag moved to an image without such a signature is refused by
	// name and the pinned base in status.baseImage is kept.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	PublicKeys []PEMPublicKey `json:"publicKeys"`
}

// ImageSignature is a signature the controller added to a build's image.
type ImageSignature struct {
	// keyFingerprint names the key that signed: "SHA256:" and the hex
	// SHA-256 of its DER public key.
	// +required
	// +kubebuilder:validation:MaxLength=80
	KeyFingerprint string `json:"keyFingerprint"`
}

// ImageSignaturePolicyAnnotation, written by the rollout controller on a
// node of a pool whose MachineOSConfig has spec.signing, is the JSON of a
// NodeSignaturePolicy: what the daemon writes into the node's
// /etc/containers before it switches, and the sign that it must switch
// with bootc's --enforce-container-sigpolicy. Absent: no verification.
const ImageSignaturePolicyAnnotation = Prefix + "imageSignaturePolicy"

// NodeSignaturePolicy is the value of ImageSignaturePolicyAnnotation.
type NodeSignaturePolicy struct {
	// repository is the pool's push repository (registry/path): its images
	// need a signature by one of publicKeys. The node scopes it as
	// containers/image normalises names (sigpolicy.Scope).
	Repository string `json:"repository"`
	// publicKeys are the trusted PEM public keys.
	PublicKeys []string `json:"publicKeys"`
}
