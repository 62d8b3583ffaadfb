// Package bootc drives the host's bootc command and reads its status: the
// few commands the Strata daemon needs (status, switch, rollback) and the
// BootcHost document `bootc status --format=json` prints.
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
	// BootOrder is "default", or "rollback" after `bootc rollback`.
	BootOrder string `json:"bootOrder,omitempty"`
}

// ImageReference names an image and how to fetch it.
type ImageReference struct {
	// Image is the reference, e.g. quay.io/x/os:tag or repo@sha256:....
	Image string `json:"image"`
	// Transport is "registry" for images pulled from a registry.
	Transport string `json:"transport"`
	// Signature is the signature policy, kept as bootc printed it.
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
	RollbackQueued bool `json:"rollbackQueued,omitempty"`
	// Type is "bootcHost" on a bootc host.
	Type *string `json:"type,omitempty"`
}

// BootEntry is one deployment.
type BootEntry struct {
	Image             *ImageStatus  `json:"image"`
	CachedUpdate      *ImageStatus  `json:"cachedUpdate,omitempty"`
	Incompatible      bool          `json:"incompatible"`
	Pinned            bool          `json:"pinned"`
	DownloadOnly      bool          `json:"downloadOnly,omitempty"`
	SoftRebootCapable bool          `json:"softRebootCapable,omitempty"`
	Store             *string       `json:"store,omitempty"`
	Ostree            *OstreeStatus `json:"ostree,omitempty"`
}

// ImageStatus is the image a deployment was made from. The nesting is
// bootc's: the reference string is at image.image.image.
type ImageStatus struct {
	Image ImageReference `json:"image"`
	// Version is the image's version label, if any.
	Version string `json:"version,omitempty"`
	// Timestamp is the image's creation time as bootc printed it.
	Timestamp string `json:"timestamp,omitempty"`
	// ImageDigest is the manifest digest, sha256:....
	ImageDigest  string `json:"imageDigest"`
	Architecture string `json:"architecture,omitempty"`
}

// OstreeStatus is a deployment's ostree identity.
type OstreeStatus struct {
	Checksum     string `json:"checksum"`
	DeploySerial int    `json:"deploySerial"`
	Stateroot    string `json:"stateroot"`
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
