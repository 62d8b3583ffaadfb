package v1alpha1

// Validation rules shared by several kinds. They are kept as constants so
// that tests and non-apiserver validators (stratactl) can use the same
// expressions the CRD schema enforces.
const (
	// TaggedPullSpecPattern matches registry/repository:tag, where the
	// registry is a host name with a dot or a port, or localhost. A digest is
	// not allowed: a push needs a tag to push to.
	TaggedPullSpecPattern = `^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$`

	// DigestedPullSpecPattern matches registry/repository@sha256:<64 hex>:
	// the only form nodes pull, so that what runs is exactly what was built.
	DigestedPullSpecPattern = `^((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?|[a-zA-Z0-9-]+:[0-9]{1,5})/[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*@sha256:[a-f0-9]{64}$`
)

// LocalObjectReference names a cluster-scoped object of a kind known from
// the field that holds it.
type LocalObjectReference struct {
	// name is the object's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// SecretReference names a Secret in the strata-system namespace. Secrets
// are never copied: builders and daemons mount or read them where they are.
type SecretReference struct {
	// name is the Secret's name in the strata-system namespace. The Secret
	// must be of type kubernetes.io/dockerconfigjson.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}
