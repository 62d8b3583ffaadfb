// Package docs checks the README and the manual in docs/ against the
// repository, so that neither rots as the code moves: the README's package
// map names every package `go list ./...` reports (and nothing that is
// gone), and every relative link of README.md and docs/*.md points at a
// file or directory that exists and, with an #anchor, at a heading of the
// target that GitHub gives that anchor.
//
// The commands the documentation prints are checked elsewhere: by
// hack/demo (TestDocCommandsRunAsPrinted, and demo check against the demo
// cluster).
package docs
