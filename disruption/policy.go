package disruption

import (
	"path"
	"strings"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func none() []v1alpha1.NodeDisruptionPolicyAction {
	return []v1alpha1.NodeDisruptionPolicyAction{{Type: v1alpha1.NoneAction}}
}

// Defaults are Strata's built-in policies, the part of OpenShift's
// defaults that holds on any Strata node. The kubelet reads its pull
// credentials at each pull; bootc, podman and skopeo read the containers
// policy and registries files at each pull too, and bootc verifies the
// next image with the live /etc/containers/policy.json, so writing these
// live is enough. OpenShift's defaults also reload CRI-O for the
// containers files; Strata's nodes may run containerd, where crio.service
// does not exist and its reload would fail the update, so that is left to
// a policy on CRI-O clusters. OpenShift's own paths (/etc/mco,
// /etc/machine-config-daemon, /etc/nmstate/openshift, its CA bundle and
// registry service) mean nothing on a Strata node and are left out.
func Defaults() v1alpha1.NodeDisruptionPolicyClusterStatus {
	var files []v1alpha1.NodeDisruptionPolicyFile
	for _, p := range []string{
		"/var/lib/kubelet/config.json",
		"/etc/containers/policy.json",
		"/etc/containers/registries.conf",
		"/etc/containers/registries.conf.d",
		"/etc/containers/registries.d",
	} {
		files = append(files, v1alpha1.NodeDisruptionPolicyFile{Path: p, Actions: none()})
	}
	return v1alpha1.NodeDisruptionPolicyClusterStatus{
		Files:  files,
		SSHKey: v1alpha1.NodeDisruptionPolicySSHKey{Actions: none()},
	}
}

// Merge puts user over defaults as OpenShift's operator does
// (MergeClusterPolicies): defaults first, a user policy for the same file
// path or unit name replacing the default in its place, the other user
// policies after them in their order, and the user's SSH key policy when
// it has actions. The result shares nothing with its inputs.
func Merge(defaults v1alpha1.NodeDisruptionPolicyClusterStatus, user v1alpha1.NodeDisruptionPolicyConfig) v1alpha1.NodeDisruptionPolicyClusterStatus {
	var out v1alpha1.NodeDisruptionPolicyClusterStatus
	fileAt := map[string]int{}
	for _, f := range defaults.Files {
		fileAt[f.Path] = len(out.Files)
		out.Files = append(out.Files, *f.DeepCopy())
	}
	for _, f := range user.Files {
		if i, ok := fileAt[f.Path]; ok {
			out.Files[i] = *f.DeepCopy()
			continue
		}
		fileAt[f.Path] = len(out.Files)
		out.Files = append(out.Files, *f.DeepCopy())
	}
	unitAt := map[v1alpha1.NodeDisruptionPolicyServiceName]int{}
	for _, u := range defaults.Units {
		unitAt[u.Name] = len(out.Units)
		out.Units = append(out.Units, *u.DeepCopy())
	}
	for _, u := range user.Units {
		if i, ok := unitAt[u.Name]; ok {
			out.Units[i] = *u.DeepCopy()
			continue
		}
		unitAt[u.Name] = len(out.Units)
		out.Units = append(out.Units, *u.DeepCopy())
	}
	if len(user.SSHKey.Actions) > 0 {
		out.SSHKey = *user.SSHKey.DeepCopy()
	} else {
		out.SSHKey = *defaults.SSHKey.DeepCopy()
	}
	return out
}

// MatchFile finds the policy for a changed file at p: of the policies
// whose path is p or a directory above it, the one with the longest path,
// as OpenShift's daemon matches (FindClosestFilePolicyPathMatch). Paths
// compare by whole elements: /etc/foo names /etc/foo/bar, not /etc/foobar.
func MatchFile(policies []v1alpha1.NodeDisruptionPolicyFile, p string) (v1alpha1.NodeDisruptionPolicyFile, bool) {
	var best v1alpha1.NodeDisruptionPolicyFile
	found := false
	for _, f := range policies {
		dir := path.Clean(f.Path)
		if !strings.HasPrefix(dir, "/") {
			continue
		}
		if p != dir && p != f.Path && !strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/") {
			continue
		}
		if !found || len(dir) > len(path.Clean(best.Path)) {
			best, found = f, true
		}
	}
	return best, found
}

// MatchUnit finds the policy for a changed unit by its exact name.
func MatchUnit(policies []v1alpha1.NodeDisruptionPolicyUnit, name string) (v1alpha1.NodeDisruptionPolicyUnit, bool) {
	for _, u := range policies {
		if string(u.Name) == name {
			return u, true
		}
	}
	return v1alpha1.NodeDisruptionPolicyUnit{}, false
}
