package configserver

import (
	"strings"

	ign "github.com/coreos/ignition/v2/config/v3_4/types"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Pointer is the pointer Ignition an installer or a cloud's user data
// gives a new node of pool: fetch and merge the pool's config from server
// (https://host:port), trusting ca (PEM), with the pool's token, as
// OpenShift's pointer configs fetch theirs from its machine-config-server.
func Pointer(server, pool string, ca, token []byte) *ign.Config {
	src := strings.TrimSuffix(server, "/") + v1alpha1.ConfigServerPathPrefix + pool
	c := &ign.Config{Ignition: ign.Ignition{Version: IgnitionVersion}}
	c.Ignition.Config.Merge = []ign.Resource{{
		Source:      &src,
		HTTPHeaders: ign.HTTPHeaders{{Name: "Authorization", Value: ptr("Bearer " + string(token))}},
	}}
	if len(ca) > 0 {
		c.Ignition.Security.TLS.CertificateAuthorities = []ign.Resource{dataURL(ca)}
	}
	return c
}
