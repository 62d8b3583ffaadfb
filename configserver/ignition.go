package configserver

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	ign "github.com/coreos/ignition/v2/config/v3_4/types"

	"github.com/strata-dev/strata/nodeconfig"
)

// IgnitionVersion is the spec version served and used in pointer
// configs: 3.4.0, which every Ignition release since 2022 reads (and
// which is what OpenShift's server hands most of its nodes).
const IgnitionVersion = "3.4.0"

// Paths on a new node.
const (
	// FirstbootUnit is the first-boot unit's name.
	FirstbootUnit = "strata-firstboot.service"
	// FirstbootDir holds the first boot's state, on /var, which survives
	// its reboot.
	FirstbootDir = "/var/lib/strata/firstboot"
	// FirstbootAuthFile is the node pull secret until the first boot is
	// done: bootc and podman read it from there, then firstboot removes it
	// (the daemon writes /run/ostree/auth.json once the node runs).
	FirstbootAuthFile = FirstbootDir + "/auth.json"
	// FirstbootDoneFile exists once the first boot is done; the unit does
	// not run again.
	FirstbootDoneFile = FirstbootDir + "/done"
	// FirstbootSignaturePolicyFile is, for a pool that signs its images,
	// the node signature policy the first boot writes into /etc and
	// enforces on its switch (strata-daemon firstboot
	// --signature-policy-file).
	FirstbootSignaturePolicyFile = FirstbootDir + "/signature-policy.json"
)

// Input is what a pool's first-boot Ignition is made of.
type Input struct {
	// Pool is the pool's name.
	Pool string
	// Image is the pool's status.newNodes.image (repo@sha256:...); ""
	// means a new node keeps the image it was installed with: no unit.
	Image string
	// NodeItems are the rendered config's /var-bound items.
	NodeItems []nodeconfig.NodeItem
	// PullSecret is the node pull secret's .dockerconfigjson; nil: none.
	PullSecret []byte
	// DaemonImage is the strata-daemon image the unit runs with podman.
	DaemonImage string
	// HealthCheckTimeout is the pool's healthCheckTimeout: how long the
	// first boot waits for the node to be healthy on the new image.
	HealthCheckTimeout time.Duration
	// SignaturePolicy is the pool's node signature policy
	// (layering.SignaturePolicy) when its MachineOSConfig signs: the
	// first boot verifies the image with it. "" when the pool does not
	// sign.
	SignaturePolicy string
}

// Render is the pool's first-boot Ignition config. It is pure: the same
// input gives the same config.
func Render(in Input) (*ign.Config, error) {
	c := &ign.Config{Ignition: ign.Ignition{Version: IgnitionVersion}}
	if in.PullSecret != nil {
		c.Storage.Files = append(c.Storage.Files, file(FirstbootAuthFile, 0o600, in.PullSecret, true))
	}
	if in.SignaturePolicy != "" {
		c.Storage.Files = append(c.Storage.Files, file(FirstbootSignaturePolicyFile, 0o644, []byte(in.SignaturePolicy), true))
	}
	for _, it := range in.NodeItems {
		if err := addItem(c, it); err != nil {
			return nil, fmt.Errorf("pool %s: %w", in.Pool, err)
		}
	}
	if in.Image != "" {
		if in.DaemonImage == "" {
			return nil, fmt.Errorf("pool %s: no strata-daemon image to run the first boot with", in.Pool)
		}
		unit := FirstbootUnitContents(in)
		c.Systemd.Units = append(c.Systemd.Units, ign.Unit{Name: FirstbootUnit, Enabled: ptr(true), Contents: &unit})
	}
	return c, nil
}

// FirstbootArgs are the arguments of `strata-daemon firstboot` in the
// unit, after the daemon image. The simulator (test/simnode) runs them
// with its own daemon binary.
func FirstbootArgs(in Input) []string {
	args := []string{"firstboot",
		"--host-root=/host",
		"--image=" + in.Image,
		"--health-check-timeout=" + in.HealthCheckTimeout.String(),
	}
	if in.PullSecret != nil {
		args = append(args, "--auth-file="+FirstbootAuthFile)
	}
	if in.SignaturePolicy != "" {
		args = append(args, "--signature-policy-file="+FirstbootSignaturePolicyFile)
	}
	return args
}

// FirstbootUnitContents is strata-firstboot.service. It runs before the
// kubelet, which requires it: a first boot that fails leaves the node
// out of the cluster rather than in it on the wrong image. The daemon
// runs in the host's namespaces (bootc and the reboot by nsenter), as the
// DaemonSet's does.
func FirstbootUnitContents(in Input) string {
	podman := []string{"/usr/bin/podman", "run", "--rm", "--privileged", "--pid=host", "--net=host", "--volume=/:/host"}
	if in.PullSecret != nil {
		podman = append(podman, "--authfile="+FirstbootAuthFile)
	}
	podman = append(podman, in.DaemonImage)
	podman = append(podman, FirstbootArgs(in)...)
	return strings.Join([]string{
		"[Unit]",
		"Description=Strata first boot: switch to pool " + in.Pool + "'s image before the kubelet starts",
		"Wants=network-online.target",
		"After=network-online.target",
		"Before=kubelet.service",
		"ConditionPathExists=!" + FirstbootDoneFile,
		"",
		"[Service]",
		"Type=oneshot",
		"RemainAfterExit=yes",
		// The image pull may take long; the reboot ends the unit.
		"TimeoutStartSec=infinity",
		"ExecStart=" + strings.Join(podman, " "),
		"",
		"[Install]",
		"WantedBy=multi-user.target",
		"RequiredBy=kubelet.service",
		"",
	}, "\n")
}

// addItem adds one node item as Ignition writes it.
func addItem(c *ign.Config, it nodeconfig.NodeItem) error {
	switch it.Kind {
	case nodeconfig.NodeFile:
		f := ign.File{Node: node(it), FileEmbedded1: ign.FileEmbedded1{Mode: it.Mode}}
		if it.Replace {
			f.Contents = dataURL(it.Contents)
		}
		for _, a := range it.Append {
			f.Append = append(f.Append, dataURL(a))
		}
		c.Storage.Files = append(c.Storage.Files, f)
	case nodeconfig.NodeDirectory:
		c.Storage.Directories = append(c.Storage.Directories, ign.Directory{Node: node(it), DirectoryEmbedded1: ign.DirectoryEmbedded1{Mode: it.Mode}})
	case nodeconfig.NodeLink:
		c.Storage.Links = append(c.Storage.Links, ign.Link{Node: node(it), LinkEmbedded1: ign.LinkEmbedded1{Target: ptr(it.Target), Hard: ptr(it.Hard)}})
	case nodeconfig.NodeSSHAuthorizedKeys:
		i := slices.IndexFunc(c.Passwd.Users, func(u ign.PasswdUser) bool { return u.Name == it.UserName })
		if i < 0 {
			c.Passwd.Users = append(c.Passwd.Users, ign.PasswdUser{Name: it.UserName})
			i = len(c.Passwd.Users) - 1
		}
		for _, k := range it.SSHAuthorizedKeys {
			c.Passwd.Users[i].SSHAuthorizedKeys = append(c.Passwd.Users[i].SSHAuthorizedKeys, ign.SSHAuthorizedKey(k))
		}
	default:
		return fmt.Errorf("node item %s of unknown kind %q", it.Path, it.Kind)
	}
	return nil
}

func node(it nodeconfig.NodeItem) ign.Node {
	n := ign.Node{Path: it.Path, Overwrite: ptr(it.Overwrite)}
	if o := it.User; o != nil {
		n.User = ign.NodeUser{ID: o.ID, Name: optional(o.Name)}
	}
	if o := it.Group; o != nil {
		n.Group = ign.NodeGroup{ID: o.ID, Name: optional(o.Name)}
	}
	return n
}

func file(path string, mode int, contents []byte, overwrite bool) ign.File {
	return ign.File{
		Node:          ign.Node{Path: path, Overwrite: ptr(overwrite)},
		FileEmbedded1: ign.FileEmbedded1{Mode: ptr(mode), Contents: dataURL(contents)},
	}
}

// dataURL carries content inline, base64 as Ignition reads any bytes.
func dataURL(b []byte) ign.Resource {
	return ign.Resource{Source: ptr("data:;base64," + base64.StdEncoding.EncodeToString(b))}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func ptr[T any](v T) *T { return &v }
