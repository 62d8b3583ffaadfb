package nodeconfig

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestNodeFileOverwriteDefault is mco-real/repro/d6-var-file-update
// (telco-reference's 08-set-rcu-normal-worker): a script under
// /usr/local/bin without `overwrite` must replace the node's older copy,
// as OpenShift's daemon writes it, or an updated script never reaches a
// node. An explicit false still leaves a different file alone, and a file
// without contents keeps Ignition's rule (overwrite needs contents).
func TestNodeFileOverwriteDefault(t *testing.T) {
	p, errs := BuildPlan(spec(ign35(`"storage":{"files":[
		{"path":"/usr/local/bin/set-rcu-normal.sh","mode":493,"contents":{"source":"data:,%23!%2Fbin%2Fbash%0Aecho%20v2%0A"}},
		{"path":"/var/lib/keep","overwrite":false,"contents":{"source":"data:,k"}},
		{"path":"/var/lib/replace","overwrite":true,"contents":{"source":"data:,r"}},
		{"path":"/var/log/append-only","append":[{"source":"data:,a"}]}
	],"directories":[{"path":"/var/lib/dir"}],"links":[{"path":"/var/lib/link","target":"/etc/motd"}]}`)), field.NewPath("spec"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := map[string]bool{
		"/usr/local/bin/set-rcu-normal.sh": true,
		"/var/lib/keep":                    false,
		"/var/lib/replace":                 true,
		"/var/log/append-only":             false,
		// Directories and links keep Ignition's default: OpenShift's
		// daemon changes only files' default.
		"/var/lib/dir":  false,
		"/var/lib/link": false,
	}
	if len(p.NodeItems) != len(want) {
		t.Fatalf("node items %+v, want %d", p.NodeItems, len(want))
	}
	for _, it := range p.NodeItems {
		if w, ok := want[it.Path]; !ok || it.Overwrite != w {
			t.Errorf("%s %s: overwrite %v, want %v", it.Kind, it.Path, it.Overwrite, w)
		}
	}
}
