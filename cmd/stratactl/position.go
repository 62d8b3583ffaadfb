package main

import (
	"fmt"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// at names where the field at path (a field path such as
// spec.config.storage.files[2].contents.source) of the object is in its
// file: FILE:LINE, or FILE when the field cannot be found there (a field
// the input left out, say). YAML and JSON input alike: JSON is YAML.
func (o object) at(path string) string {
	if line := o.lineOf(path); line > 0 {
		return fmt.Sprintf("%s:%d", o.file, line)
	}
	return o.file
}

// lineOf is the line of the file that the field at path of the object is
// on, 0 if unknown. The conversion to JSON that decoding goes through
// keeps no positions, so the document is read again, as YAML nodes, only
// for messages. The deepest part of the path that is in the document
// gives the line: for a key the input has, its line; for one it lacks,
// the line of the object that lacks it.
func (o object) lineOf(path string) int {
	if len(o.src.raw) == 0 {
		return 0
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(o.src.raw, &doc); err != nil || len(doc.Content) == 0 {
		return 0
	}
	n := doc.Content[0]
	line := n.Line
	steps := pathSteps(path)
	if o.item > 0 {
		steps = append([]any{"items", o.item - 1}, steps...)
	}
	for _, s := range steps {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next, key *yaml.Node
		switch s := s.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				break
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == s {
					key, next = n.Content[i], n.Content[i+1]
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && s < len(n.Content) {
				next = n.Content[s]
			}
		}
		if next == nil {
			break
		}
		n, line = next, next.Line
		if key != nil {
			line = key.Line
		}
	}
	if line == 0 {
		return 0
	}
	return o.src.line + line - 1
}

// pathSteps splits a field path into keys (strings) and list indices
// (ints): spec.config.storage.files[2].path is spec, config, storage,
// files, 2, path.
func pathSteps(path string) []any {
	var steps []any
	for _, part := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key != "" {
			steps = append(steps, key)
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			if !ok {
				break
			}
			if i, err := strconv.Atoi(idx); err == nil {
				steps = append(steps, i)
			} else {
				steps = append(steps, idx)
			}
			_, rest, _ = strings.Cut(after, "[")
		}
	}
	return steps
}
