package bootcsim

// The document `bootc status --format=json` prints, as bootc 1.16 writes
// it: fields bootc serializes as null are pointers without omitempty.
//
// These types deliberately do not share the daemon's (rollout/bootc): the
// simulator writes the document from BOOTC.md on its own, so a misreading
// of the schema on either side fails the e2e instead of agreeing with
// itself.

const (
	// APIVersion is the apiVersion of the status document.
	APIVersion = "org.containers.bootc/v1"
	// Kind is the kind of the status document.
	Kind = "BootcHost"
	// HostName is metadata.name: bootc has one object, "host".
	HostName = "host"
	// TransportRegistry is the only transport the simulator pulls from.
	TransportRegistry = "registry"
	// StoreOstreeContainer is BootEntry.Store for every deployment.
	StoreOstreeContainer = "ostreeContainer"
	// HostTypeBootc is HostStatus.Type on a bootc host.
	HostTypeBootc = "bootcHost"
	// BootOrderDefault and BootOrderRollback are HostSpec.BootOrder.
	BootOrderDefault  = "default"
	BootOrderRollback = "rollback"
)

// Host is the whole status document.
type Host struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   Metadata   `json:"metadata"`
	Spec       HostSpec   `json:"spec"`
	Status     HostStatus `json:"status"`
}

// Metadata is the object metadata; only the name is set.
type Metadata struct {
	Name string `json:"name"`
}

// HostSpec is what the host boots next.
type HostSpec struct {
	// Image is the staged deployment's image, else the booted one's; nil
	// on a host that is not a bootc host.
	Image *ImageReference `json:"image"`
	// BootOrder is "rollback" while a rollback is queued, else "default".
	BootOrder string `json:"bootOrder"`
}

// ImageReference is an image and how it is fetched.
type ImageReference struct {
	// Image is the pull spec given to switch (a tag+digest reference loses
	// its tag, as bootc canonicalizes it).
	Image string `json:"image"`
	// Transport is "registry".
	Transport string `json:"transport"`
	// Signature is omitted: the simulator verifies no signatures.
	Signature *string `json:"signature,omitempty"`
}

// HostStatus lists the deployments.
type HostStatus struct {
	Staged         *BootEntry `json:"staged"`
	Booted         *BootEntry `json:"booted"`
	Rollback       *BootEntry `json:"rollback"`
	RollbackQueued bool       `json:"rollbackQueued"`
	// Type is "bootcHost" when the booted deployment has an image.
	Type *string `json:"type"`
}

// BootEntry is one deployment.
type BootEntry struct {
	Image             *ImageStatus     `json:"image"`
	CachedUpdate      *ImageStatus     `json:"cachedUpdate"`
	Incompatible      bool             `json:"incompatible"`
	Pinned            bool             `json:"pinned"`
	SoftRebootCapable bool             `json:"softRebootCapable"`
	DownloadOnly      bool             `json:"downloadOnly"`
	Store             *string          `json:"store"`
	Ostree            *BootEntryOstree `json:"ostree"`
}

// ImageStatus is the image a deployment was made from.
type ImageStatus struct {
	Image ImageReference `json:"image"`
	// Version is the image's org.opencontainers.image.version label.
	Version *string `json:"version"`
	// Timestamp is the image's creation time (RFC 3339, UTC).
	Timestamp *string `json:"timestamp"`
	// ImageDigest is the manifest digest, sha256:....
	ImageDigest string `json:"imageDigest"`
	// Architecture is the image configuration's architecture (amd64).
	Architecture string `json:"architecture"`
}

// BootEntryOstree is the ostree side of a deployment.
type BootEntryOstree struct {
	Stateroot    string `json:"stateroot"`
	Checksum     string `json:"checksum"`
	DeploySerial int    `json:"deploySerial"`
}

func newHost() *Host {
	return &Host{
		APIVersion: APIVersion,
		Kind:       Kind,
		Metadata:   Metadata{Name: HostName},
		Spec:       HostSpec{BootOrder: BootOrderDefault},
	}
}

func ptr[T any](v T) *T { return &v }
