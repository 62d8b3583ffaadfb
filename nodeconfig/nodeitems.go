package nodeconfig

import (
	"cmp"
	"slices"
)

// NodeItemKind says what a NodeItem writes.
type NodeItemKind string

const (
	// NodeFile is a regular file.
	NodeFile NodeItemKind = "File"
	// NodeDirectory is a directory.
	NodeDirectory NodeItemKind = "Directory"
	// NodeLink is a symbolic or hard link.
	NodeLink NodeItemKind = "Link"
	// NodeSSHAuthorizedKeys is the set of SSH keys of an existing user.
	NodeSSHAuthorizedKeys NodeItemKind = "SSHAuthorizedKeys"
)

// Owner is a user or group, by numeric id or by name; at most one is set,
// and neither means root. Names are resolved on the node.
type Owner struct {
	ID   *int   `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// NodeItem is configuration the daemon writes on the node itself, because
// a switch to a new image never changes /var (nor /home, /root, /srv, /opt,
// /mnt, /media or /usr/local, which are links into it): baking it into the
// image would have no effect after installation. The list is sorted by
// path, then kind, then user, and its JSON encoding is stable.
type NodeItem struct {
	Kind NodeItemKind `json:"kind"`
	// Path is the absolute path on the node (empty for SSH keys).
	Path string `json:"path,omitempty"`
	// Mode is the permission bits, with Ignition's defaults applied (0644
	// files, 0755 directories); nil for links and SSH keys.
	Mode *int `json:"mode,omitempty"`
	// User and Group own the item; nil means root.
	User  *Owner `json:"user,omitempty"`
	Group *Owner `json:"group,omitempty"`
	// Overwrite is Ignition's overwrite: false means the daemon must leave
	// an existing item with different content alone and report it.
	Overwrite bool `json:"overwrite,omitempty"`
	// Replace is true when the file's content is Contents followed by
	// Append; false means keep the existing content (creating an empty
	// file if there is none) and add Append to it.
	Replace bool `json:"replace,omitempty"`
	// Contents is the decoded, decompressed file content.
	Contents []byte `json:"contents,omitempty"`
	// Append is content added after the file's content, in order.
	Append [][]byte `json:"append,omitempty"`
	// Target is a link's target; Hard makes it a hard link.
	Target string `json:"target,omitempty"`
	Hard   bool   `json:"hard,omitempty"`
	// UserName and SSHAuthorizedKeys are for NodeSSHAuthorizedKeys: the
	// keys an existing user gets, written to that user's
	// ~/.ssh/authorized_keys.d/ on the node (home directories are in /var).
	UserName          string   `json:"userName,omitempty"`
	SSHAuthorizedKeys []string `json:"sshAuthorizedKeys,omitempty"`
}

func sortNodeItems(items []NodeItem) {
	slices.SortStableFunc(items, func(a, b NodeItem) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.UserName, b.UserName))
	})
}
