package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root: go test runs in the package's directory.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// markdownFiles are the files whose links are checked: README.md and
// docs/*.md, relative to the root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rel)
	}
	return out
}

// goPackages are the packages `go list ./...` reports, relative to the
// module: what a reader of the package map expects to find there. With
// -e, a package that does not build yet is listed too: it still needs its
// line, and this test is not where a broken build should be reported.
func goPackages(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-f", "{{.Dir}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	var pkgs []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, filepath.ToSlash(rel))
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list ./... reports %d packages: %q", len(pkgs), pkgs)
	}
	return pkgs
}

// TestPackageMapComplete fails when a package go list reports is missing
// from the README's package map, or when the map names a path that is
// neither a package nor a directory of the repository.
func TestPackageMapComplete(t *testing.T) {
	root := root(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, inSection := packageMap(string(readme))
	if !inSection {
		t.Errorf("README.md has no section headed \"Package map\"; looking for packages anywhere in it")
	}
	var missing []string
	pkgs := goPackages(t, root)
	known := map[string]bool{}
	for _, p := range pkgs {
		known[p] = true
		if _, ok := entries[p]; !ok {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of the %d packages go list ./... reports are missing from the README's package map (a line each, saying what it does and on which side it runs):\n  %s",
			len(missing), len(pkgs), strings.Join(missing, "\n  "))
	}
	if !inSection {
		return
	}
	var stale []string
	for e, line := range entries {
		if known[e] {
			continue
		}
		if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(e))); err == nil && fi.IsDir() {
			continue // a folder of no Go package (config/, images/os-base)
		}
		stale = append(stale, fmt.Sprintf("README.md:%d: %s", line, e))
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("the package map names what is neither a package nor a folder:\n  %s", strings.Join(stale, "\n  "))
	}
}

var (
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	backtickRE = regexp.MustCompile("`([^`]+)`")
	pathRE     = regexp.MustCompile(`^[a-z0-9][A-Za-z0-9_.\-/]*$`)
)

// packageMap reads the entries of the README's package map, by the line
// they are on: the first cell of each table row (its first `code span`)
// and the first word of each line of a code block, in the section whose
// heading is "Package map". Without that section it reads the whole file,
// so that the test still says which packages are missing.
func packageMap(md string) (map[string]int, bool) {
	lines := strings.Split(md, "\n")
	start, end, level := 0, len(lines), 0
	found := false
	fence := false
	for i, l := range lines {
		if isFence(l) {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		switch {
		case !found && strings.EqualFold(m[2], "Package map"):
			found, start, level = true, i+1, len(m[1])
		case found && len(m[1]) <= level:
			end = i
		}
		if found && end != len(lines) {
			break
		}
	}
	entries := map[string]int{}
	add := func(word string, line int) {
		word = strings.TrimRight(word, "/,:")
		if pathRE.MatchString(word) {
			if _, ok := entries[word]; !ok {
				entries[word] = line
			}
		}
	}
	fence = false
	for i := start; i < end; i++ {
		l := lines[i]
		if isFence(l) {
			fence = !fence
			continue
		}
		switch {
		case fence:
			if f := strings.Fields(l); len(f) > 0 {
				add(f[0], i+1)
			}
		case strings.HasPrefix(strings.TrimSpace(l), "|"):
			cells := strings.Split(strings.TrimSpace(l), "|")
			if len(cells) > 1 {
				if m := backtickRE.FindStringSubmatch(cells[1]); m != nil {
					add(m[1], i+1)
				}
			}
		}
	}
	return entries, found
}

func isFence(line string) bool {
	return strings.HasPrefix(strings.TrimSpace(line), "```")
}

// TestRelativeLinks fails on a relative link of README.md or docs/*.md
// that points nowhere: at a file or folder that does not exist, outside
// the repository, or at an #anchor that no heading of the target makes.
func TestRelativeLinks(t *testing.T) {
	root := root(t)
	checked := 0
	for _, f := range markdownFiles(t, root) {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(raw)) {
			if isExternal(l.target) {
				continue
			}
			checked++
			if err := checkLink(root, f, l.target); err != nil {
				t.Errorf("%s:%d: link %q: %v", f, l.line, l.target, err)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d relative links; README.md and docs/ link each other more than that", checked)
	}
}

type link struct {
	target string
	line   int
}

var (
	linkRE     = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLinkRE  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
	schemeRE   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.\-]*:`)
)

// links are the targets of a Markdown file's inline and reference links
// (images included), outside code blocks and code spans.
func links(md string) []link {
	var out []link
	fence := false
	sc := bufio.NewScanner(strings.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if isFence(l) {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		if m := refLinkRE.FindStringSubmatch(l); m != nil {
			out = append(out, link{target: m[1], line: n})
			continue
		}
		l = codeSpanRE.ReplaceAllString(l, "")
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			out = append(out, link{target: m[1], line: n})
		}
	}
	return out
}

func isExternal(target string) bool {
	return schemeRE.MatchString(target) || strings.HasPrefix(target, "//")
}

var lineAnchorRE = regexp.MustCompile(`^L\d+(-L\d+)?$`)

// checkLink says why a relative link of the file from (relative to root)
// points nowhere, or nil.
func checkLink(root, from, target string) error {
	path, anchor, _ := strings.Cut(target, "#")
	dest := filepath.Join(root, filepath.Dir(from), filepath.FromSlash(path))
	if path == "" {
		dest = filepath.Join(root, from)
	}
	rel, err := filepath.Rel(root, dest)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("points outside the repository")
	}
	fi, err := os.Stat(dest)
	if err != nil {
		return fmt.Errorf("%s does not exist", filepath.ToSlash(rel))
	}
	if anchor == "" {
		return nil
	}
	if fi.IsDir() {
		return fmt.Errorf("an anchor on a folder (%s) goes nowhere", filepath.ToSlash(rel))
	}
	if !strings.HasSuffix(dest, ".md") {
		if lineAnchorRE.MatchString(anchor) {
			return nil
		}
		return fmt.Errorf("anchor #%s on %s, which is not Markdown", anchor, filepath.ToSlash(rel))
	}
	raw, err := os.ReadFile(dest)
	if err != nil {
		return err
	}
	slugs := anchors(string(raw))
	if !slugs[anchor] {
		var have []string
		for s := range slugs {
			have = append(have, "#"+s)
		}
		sort.Strings(have)
		return fmt.Errorf("no heading of %s makes #%s (it has %s)", filepath.ToSlash(rel), anchor, strings.Join(have, " "))
	}
	return nil
}

var (
	mdLinkTextRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlAnchorRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// anchors are the fragments GitHub makes for a Markdown file: one per
// heading (ATX headings outside code blocks), by slug, and the names of
// explicit <a name> or <a id> anchors.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, l := range strings.Split(md, "\n") {
		if isFence(l) {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// slug is the anchor GitHub gives a heading (github-slugger): the
// heading's text (links by their text, code spans without their
// backticks), lower case, with every character that is not a letter, a
// digit, a space, a hyphen or an underscore removed and each space made
// a hyphen.
func slug(heading string) string {
	text := mdLinkTextRE.ReplaceAllString(heading, "$1")
	text = strings.ReplaceAll(text, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Rolling out":                          "rolling-out",
		"Per-node status: MachineConfigNode":   "per-node-status-machineconfignode",
		"`spec.gates`, and what they read":     "specgates-and-what-they-read",
		"[Boot disks](boot-disks.md) and more": "boot-disks-and-more",
		"What is guaranteed?":                  "what-is-guaranteed",
		"Kured & system-upgrade-controller":    "kured--system-upgrade-controller",
		"snake_case names":                     "snake_case-names",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestCheckLinkFindsBroken keeps the link check from passing by finding
// nothing: in a tree of its own, each kind of broken link is reported and
// each good one is not.
func TestCheckLinkFindsBroken(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	page := "# Page\n\n## Table of contents\n\n## Rolling out\n\n## Rolling out\n\n```sh\n# not a heading\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "docs", "page.md"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := "# R\n\n[ok](docs/page.md) [ok](docs/page.md#rolling-out) [ok](docs/page.md#rolling-out-1) [ok](#r) [ok](docs)\n" +
		"[bad](docs/gone.md) [bad](docs/page.md#not-a-heading) [bad](docs/page.md#rolling-out-2) [bad](#nowhere) [bad](../outside.md)\n" +
		"`[code](gone.md)` [web](https://example.com/x#y)\n\n```text\n[fenced](gone.md)\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644); err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, l := range links(readme) {
		if isExternal(l.target) {
			continue
		}
		if err := checkLink(dir, "README.md", l.target); err != nil {
			bad = append(bad, l.target)
		}
	}
	want := []string{"docs/gone.md", "docs/page.md#not-a-heading", "docs/page.md#rolling-out-2", "#nowhere", "../outside.md"}
	if strings.Join(bad, " ") != strings.Join(want, " ") {
		t.Errorf("broken links found: %q, want %q", bad, want)
	}
}

func TestPackageMapReadsTheSection(t *testing.T) {
	md := "# R\n\nSee `api/v1alpha1`.\n\n## Package map\n\n| package | side | what |\n|---|---|---|\n" +
		"| [`controllers/render`](controllers/render) | controller | renders |\n| `rollout/` | node | the daemon |\n\n" +
		"```text\nconfig/   manifests\n```\n\n## Next\n\n| `sbom` | x | y |\n"
	got, found := packageMap(md)
	if !found {
		t.Fatal("the Package map section was not found")
	}
	var names []string
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	if want := "config controllers/render rollout"; strings.Join(names, " ") != want {
		t.Errorf("entries %q, want %s", names, want)
	}
}
