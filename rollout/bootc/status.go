// Package bootc drives the host's bootc command and reads its status: the
// few commands the Strata daemon needs (status; switch, plain, locked or
// applied with a soft reboot; lock and apply a downloaded deployment;
// rollback; which of these options this bootc has), systemd's count of
// soft reboots, and the BootcHost document `bootc status --format=json` prints. The document's
// types are the only Go declaration of it: the bootc simulator
// (test/bootcsim) writes its status with them, so they encode as
// bootc 1.16 does (a key bootc always writes is never omitted, an absent
// value is null), and the simulator's tests parse its output here.
package bootc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// API versions of the BootcHost document. Older bootc releases print
// v1alpha1; the fields the daemon reads are the same in both.
const (
	APIVersionV1       = "org.containers.bootc/v1"
	APIVersionV1Alpha1 = "org.containers.bootc/v1alpha1"
	// Kind is the kind of the status document.
	Kind = "BootcHost"
	// HostName is metadata.name: bootc has one object, "host".
	HostName = "host"
	// TransportRegistry is ImageReference.Transport for an image pulled
	// from a registry.
	TransportRegistry = "registry"
	// StoreOstreeContainer is BootEntry.Store of an ostree deployment.
	StoreOstreeContainer = "ostreeContainer"
	// HostTypeBootc is HostStatus.Type on a bootc host.
	HostTypeBootc = "bootcHost"
	// BootOrderDefault and BootOrderRollback are HostSpec.BootOrder.
	BootOrderDefault  = "default"
	BootOrderRollback = "rollback"
)

// Host is the document `bootc status --format=json` prints.
type Host struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   Metadata   `json:"metadata"`
	Spec       HostSpec   `json:"spec"`
	Status     HostStatus `json:"status"`
}

// Metadata is the document's metadata; bootc names the host "host".
type Metadata struct {
	Name string `json:"name,omitempty"`
}

// HostSpec is what the host is asked to boot.
type HostSpec struct {
	// Image is the image the host follows; nil when it follows none.
	Image *ImageReference `json:"image"`
	// BootOrder is "default", or "rollback" after `bootc rollback`;
	// older bootc releases do not write it.
	BootOrder string `json:"bootOrder"`
}

// ImageReference names an image and how to fetch it.
type ImageReference struct {
	// Image is the reference, e.g. quay.io/x/os:tag or repo@sha256:....
	Image string `json:"image"`
	// Transport is "registry" for images pulled from a registry.
	Transport string `json:"transport"`
	// Signature is the signature verification, kept as bootc printed it
	// ("containerPolicy", "insecure" or {"ostreeRemote": name}); bootc
	// omits it when there is none.
	Signature json.RawMessage `json:"signature,omitempty"`
}

// HostStatus lists the host's deployments.
type HostStatus struct {
	// Staged is the deployment the next boot uses, if one is staged.
	Staged *BootEntry `json:"staged"`
	// Booted is the running deployment; nil on a host bootc does not
	// manage.
	Booted *BootEntry `json:"booted"`
	// Rollback is the previous deployment.
	Rollback *BootEntry `json:"rollback"`
	// RollbackQueued is true after `bootc rollback`: the next boot uses
	// the rollback deployment.
	RollbackQueued bool `json:"rollbackQueued"`
	// Type is "bootcHost" on a bootc host, else nil.
	Type *string `json:"type"`
}

// BootEntry is one deployment.
type BootEntry struct {
	Image        *ImageStatus `json:"image"`
	CachedUpdate *ImageStatus `json:"cachedUpdate"`
	Incompatible bool         `json:"incompatible"`
	Pinned       bool         `json:"pinned"`
	// DownloadOnly is true on a staged deployment that no reboot applies
	// (switch or upgrade --download-only) until `bootc upgrade
	// --from-downloaded`. bootc computes it as "staged and finalization
	// locked", so only the staged entry has it.
	DownloadOnly bool `json:"downloadOnly"`
	// SoftRebootCapable is true when, relative to the booted deployment,
	// this one can be soft-rebooted into: same kernel, initramfs, kernel
	// arguments and SELinux policy. bootc 1.16 does not see a change of
	// the image's kargs.d here (bootc issue 1350), so a kernel-argument
	// change must not be trusted to this flag. Older bootc releases do
	// not write it (false).
	SoftRebootCapable bool          `json:"softRebootCapable"`
	Store             *string       `json:"store"`
	Ostree            *OstreeStatus `json:"ostree"`
}

// ImageStatus is the image a deployment was made from. The nesting is
// bootc's: the reference string is at image.image.image.
type ImageStatus struct {
	Image ImageReference `json:"image"`
	// Version is the image's org.opencontainers.image.version label; ""
	// for none, which bootc writes as null.
	Version string `json:"version"`
	// Timestamp is the image's creation time as bootc printed it (RFC
	// 3339, UTC); "" for none, which bootc writes as null.
	Timestamp string `json:"timestamp"`
	// ImageDigest is the manifest digest, sha256:....
	ImageDigest string `json:"imageDigest"`
	// Architecture is the image's architecture (amd64); older bootc
	// releases do not write it.
	Architecture string `json:"architecture"`
}

// MarshalJSON writes an empty Version or Timestamp as null, as bootc
// does with its optional fields.
func (s ImageStatus) MarshalJSON() ([]byte, error) {
	type plain ImageStatus
	return json.Marshal(struct {
		plain
		Version   *string `json:"version"`
		Timestamp *string `json:"timestamp"`
	}{plain(s), orNull(s.Version), orNull(s.Timestamp)})
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// OstreeStatus is a deployment's ostree identity.
type OstreeStatus struct {
	Stateroot    string `json:"stateroot"`
	Checksum     string `json:"checksum"`
	DeploySerial int    `json:"deploySerial"`
}

// Parse reads a BootcHost document of either supported API version.
func Parse(data []byte) (*Host, error) {
	var h Host
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("parse bootc status: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("parse bootc status: data after the document")
	}
	switch h.APIVersion {
	case APIVersionV1, APIVersionV1Alpha1:
	default:
		return nil, fmt.Errorf("parse bootc status: unsupported apiVersion %q", h.APIVersion)
	}
	if h.Kind != Kind {
		return nil, fmt.Errorf("parse bootc status: kind %q, want %s", h.Kind, Kind)
	}
	return &h, nil
}

// Digest is the entry's image digest, or "" when it has no image.
func (e *BootEntry) Digest() string {
	if e == nil || e.Image == nil {
		return ""
	}
	return e.Image.ImageDigest
}

// PullSpec is the entry's image as repo@digest, the form Strata's node
// annotations carry, or "" when the entry has no image or no digest.
func (e *BootEntry) PullSpec() string {
	d := e.Digest()
	if d == "" {
		return ""
	}
	return Repository(e.Image.Image.Image) + "@" + d
}

// Repository strips the tag and digest from an image reference:
// "127.0.0.1:5000/os:v1@sha256:..." gives "127.0.0.1:5000/os".
func Repository(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	// A colon after the last slash starts a tag; one before it is a
	// registry's port.
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}

// DigestOf is the digest of a repo@digest pull spec, or "" when it has
// none.
func DigestOf(pullSpec string) string {
	i := strings.LastIndexByte(pullSpec, '@')
	if i < 0 {
		return ""
	}
	return pullSpec[i+1:]
}

// SignatureContainerPolicy is ImageReference.Signature of an image
// bootc fetched under the host's signature policy (switch
// --enforce-container-sigpolicy; ostree-image-signed: in the origin).
const SignatureContainerPolicy = `"containerPolicy"`

// Verified says whether bootc fetched the entry's image under the
// host's signature policy (its reference's signature is
// containerPolicy): switched to with --enforce-container-sigpolicy, or
// upgraded from such a spec, which bootc verifies again.
func (e *BootEntry) Verified() bool {
	return e != nil && e.Image != nil && string(bytes.TrimSpace(e.Image.Image.Signature)) == SignatureContainerPolicy
}
