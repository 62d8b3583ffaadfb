package imageref

import "strings"

// Repository is a pull spec's repository: registry/path without the tag
// or digest, as containers' policy.json and registries.d scope it.
func Repository(spec string) string {
	spec, _, _ = strings.Cut(spec, "@")
	if i := strings.LastIndex(spec, ":"); i > strings.LastIndex(spec, "/") {
		return spec[:i]
	}
	return spec
}
