package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// document is one YAML document of a file: its text, and the line of the
// file it starts on, so that messages can point into the file.
type document struct {
	raw []byte
	// line is the file's line (from 1) of raw's first line.
	line int
}

// splitDocuments splits a YAML stream into its documents as YAML defines
// them: a line that starts with "---" followed by nothing but a comment
// starts a new document (as kubectl splits; "--- value" stays in the
// document, which the YAML parser reads), and a line that starts with
// "..." followed by blanks or a comment ends one. Text after a "..."
// marker is a new document even without "---", as YAML 1.2 allows; the
// reader of k8s.io/apimachinery knows only "---", so a document after
// "..." vanished into the one before.
func splitDocuments(r io.Reader) ([]document, error) {
	br := bufio.NewReader(r)
	var docs []document
	cur := document{line: 1}
	flush := func(next int) {
		docs = append(docs, cur)
		cur = document{line: next}
	}
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			switch {
			case isMarker(line, "---"), isMarker(line, "..."):
				flush(n + 1)
			default:
				cur.raw = append(cur.raw, line...)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	flush(0)
	return docs, nil
}

// isMarker reports whether line is the marker m alone, or followed by a
// comment.
func isMarker(line []byte, m string) bool {
	rest, ok := bytes.CutPrefix(line, []byte(m))
	if !ok {
		return false
	}
	rest = bytes.TrimSpace(rest)
	return len(rest) == 0 || rest[0] == '#' && len(line) > len(m) && (line[len(m)] == ' ' || line[len(m)] == '\t')
}
