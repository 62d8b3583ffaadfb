package ostreeimage

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// KargsDir is where a bootc image carries its kernel arguments.
const KargsDir = "usr/lib/bootc/kargs.d"

// KargsFile is one usr/lib/bootc/kargs.d/*.toml file.
type KargsFile struct {
	Kargs []string
	// MatchArchitectures limits the file to these architectures (Rust
	// names: x86_64, aarch64, powerpc64, s390x); nil means all.
	MatchArchitectures []string
}

// Applies reports whether the file's kargs apply on arch.
func (f KargsFile) Applies(arch string) bool {
	return f.MatchArchitectures == nil || slices.Contains(f.MatchArchitectures, arch)
}

// HostArch is the host's architecture as bootc names it (Rust's
// std::env::consts::ARCH), for match-architectures.
func HostArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "ppc64le", "ppc64":
		return "powerpc64"
	case "386":
		return "x86"
	}
	return runtime.GOARCH
}

// ReadKargs reads the kargs.d files of the tree fsys (an image or a
// deployment; give it an os.Root's FS so that no link leads outside) as
// bootc does: files ending in .toml, in name order, those whose
// match-architectures include arch. No directory means no kargs.
func ReadKargs(fsys fs.FS, arch string) ([]string, error) {
	entries, err := fs.ReadDir(fsys, KargsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var files []kargsDirFile
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".toml") {
			continue
		}
		name := path.Join(KargsDir, e.Name())
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		files = append(files, kargsDirFile{name: name, data: data})
	}
	return kargsOf(files, arch)
}

// kargsDirFile is one file of KargsDir, name relative to the root.
type kargsDirFile struct {
	name string
	data []byte
}

// kargsOf is the kernel arguments of these kargs.d files on arch, in the
// order of their names.
func kargsOf(files []kargsDirFile, arch string) ([]string, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var kargs []string
	for _, file := range files {
		f, err := ParseKargsFile(file.data)
		if err != nil {
			return nil, fmt.Errorf("parsing /%s: %w", file.name, err)
		}
		if f.Applies(arch) {
			kargs = append(kargs, f.Kargs...)
		}
	}
	return kargs, nil
}

// MergeKargs is bootc's rule for a new deployment's kernel arguments:
// the current ones, less those the old image had and the new one does
// not, plus those the new image has and the old one did not. Arguments
// set locally on the machine stay.
func MergeKargs(current, oldImage, newImage []string) []string {
	var out []string
	for _, k := range current {
		if slices.Contains(oldImage, k) && !slices.Contains(newImage, k) {
			continue
		}
		out = append(out, k)
	}
	for _, k := range newImage {
		if !slices.Contains(oldImage, k) {
			out = append(out, k)
		}
	}
	return out
}

// ParseKargsFile parses a kargs.d TOML file. bootc reads it with serde
// and deny_unknown_fields: a "kargs" array of strings (required) and an
// optional "match-architectures" array of strings, nothing else. This is
// the subset of TOML such a file can use: comments, bare or quoted keys,
// basic and literal strings, arrays over several lines with a trailing
// comma. Multi-line strings are rejected.
func ParseKargsFile(data []byte) (KargsFile, error) {
	if !utf8.Valid(data) {
		return KargsFile{}, errors.New("not valid UTF-8")
	}
	p := &tomlParser{s: string(data), line: 1}
	var f KargsFile
	seen := map[string]bool{}
	for {
		p.skipSpaceAndNewlines()
		if p.eof() {
			break
		}
		if p.peek() == '[' {
			return KargsFile{}, p.errorf("tables are not allowed")
		}
		key, err := p.key()
		if err != nil {
			return KargsFile{}, err
		}
		p.skipSpace()
		if p.peek() == '.' {
			return KargsFile{}, p.errorf("unknown field %q (dotted keys are not allowed)", key)
		}
		if !p.consume('=') {
			return KargsFile{}, p.errorf("expected '=' after key %q", key)
		}
		if seen[key] {
			return KargsFile{}, p.errorf("duplicate key %q", key)
		}
		seen[key] = true
		p.skipSpace()
		values, err := p.stringArray()
		if err != nil {
			return KargsFile{}, fmt.Errorf("%s: %w", key, err)
		}
		switch key {
		case "kargs":
			f.Kargs = values
		case "match-architectures":
			f.MatchArchitectures = values
		default:
			return KargsFile{}, p.errorf("unknown field %q, expected kargs or match-architectures", key)
		}
		p.skipSpace()
		p.skipComment()
		if !p.eof() && !p.consume('\n') && !p.consumeCRLF() {
			return KargsFile{}, p.errorf("expected a newline after the value of %q", key)
		}
	}
	if !seen["kargs"] {
		return KargsFile{}, errors.New("missing field kargs")
	}
	return f, nil
}

// FormatKargsFile writes f as TOML that ParseKargsFile reads back.
func FormatKargsFile(f KargsFile) []byte {
	var b strings.Builder
	b.WriteString("kargs = " + formatTOMLArray(f.Kargs) + "\n")
	if f.MatchArchitectures != nil {
		b.WriteString("match-architectures = " + formatTOMLArray(f.MatchArchitectures) + "\n")
	}
	return []byte(b.String())
}

func formatTOMLArray(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		var b strings.Builder
		b.WriteByte('"')
		for _, r := range v {
			switch {
			case r == '"' || r == '\\':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r < 0x20 || r == 0x7f:
				fmt.Fprintf(&b, `\u%04X`, r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
		quoted[i] = b.String()
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

type tomlParser struct {
	s    string
	pos  int
	line int
}

func (p *tomlParser) eof() bool { return p.pos >= len(p.s) }

func (p *tomlParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.pos]
}

func (p *tomlParser) consume(c byte) bool {
	if p.peek() == c && !p.eof() {
		p.pos++
		if c == '\n' {
			p.line++
		}
		return true
	}
	return false
}

func (p *tomlParser) consumeCRLF() bool {
	if strings.HasPrefix(p.s[p.pos:], "\r\n") {
		p.pos += 2
		p.line++
		return true
	}
	return false
}

func (p *tomlParser) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", p.line, fmt.Sprintf(format, args...))
}

func (p *tomlParser) skipSpace() {
	for p.peek() == ' ' || p.peek() == '\t' {
		p.pos++
	}
}

func (p *tomlParser) skipComment() {
	if p.peek() != '#' {
		return
	}
	for !p.eof() && p.peek() != '\n' && !strings.HasPrefix(p.s[p.pos:], "\r\n") {
		p.pos++
	}
}

// skipSpaceAndNewlines skips white space, newlines and comments.
func (p *tomlParser) skipSpaceAndNewlines() {
	for {
		p.skipSpace()
		p.skipComment()
		if !p.consume('\n') && !p.consumeCRLF() {
			return
		}
	}
}

func isBareKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func (p *tomlParser) key() (string, error) {
	switch p.peek() {
	case '"', '\'':
		return p.str()
	}
	start := p.pos
	for !p.eof() && isBareKeyChar(p.peek()) {
		p.pos++
	}
	if p.pos == start {
		return "", p.errorf("expected a key")
	}
	return p.s[start:p.pos], nil
}

func (p *tomlParser) stringArray() ([]string, error) {
	if !p.consume('[') {
		return nil, p.errorf("expected an array of strings")
	}
	values := []string{}
	for {
		p.skipSpaceAndNewlines()
		if p.consume(']') {
			return values, nil
		}
		v, err := p.str()
		if err != nil {
			return nil, err
		}
		values = append(values, v)
		p.skipSpaceAndNewlines()
		if p.consume(',') {
			continue
		}
		if p.consume(']') {
			return values, nil
		}
		return nil, p.errorf("expected ',' or ']' in array")
	}
}

func (p *tomlParser) str() (string, error) {
	quote := p.peek()
	if quote != '"' && quote != '\'' {
		return "", p.errorf("expected a string")
	}
	if strings.HasPrefix(p.s[p.pos:], strings.Repeat(string(quote), 3)) {
		return "", p.errorf("multi-line strings are not supported")
	}
	p.pos++
	var b strings.Builder
	for {
		if p.eof() {
			return "", p.errorf("unterminated string")
		}
		r, size := utf8.DecodeRuneInString(p.s[p.pos:])
		p.pos += size
		switch {
		case r == rune(quote):
			return b.String(), nil
		case r == '\n' || r == '\r':
			return "", p.errorf("newline in string")
		case (r < 0x20 && r != '\t') || r == 0x7f:
			return "", p.errorf("control character %U in string", r)
		case r == '\\' && quote == '"':
			e, err := p.escape()
			if err != nil {
				return "", err
			}
			b.WriteRune(e)
		default:
			b.WriteRune(r)
		}
	}
}

func (p *tomlParser) escape() (rune, error) {
	if p.eof() {
		return 0, p.errorf("unterminated string")
	}
	c := p.s[p.pos]
	p.pos++
	switch c {
	case 'b':
		return '\b', nil
	case 't':
		return '\t', nil
	case 'n':
		return '\n', nil
	case 'f':
		return '\f', nil
	case 'r':
		return '\r', nil
	case '"':
		return '"', nil
	case '\\':
		return '\\', nil
	case 'u', 'U':
		n := 4
		if c == 'U' {
			n = 8
		}
		if p.pos+n > len(p.s) {
			return 0, p.errorf("short unicode escape")
		}
		hex := p.s[p.pos : p.pos+n]
		v, err := strconv.ParseUint(hex, 16, 32)
		if err != nil || strings.ContainsAny(hex, "+-") {
			return 0, p.errorf("invalid unicode escape %q", hex)
		}
		p.pos += n
		r := rune(v)
		if !utf8.ValidRune(r) {
			return 0, p.errorf("invalid unicode scalar %q", hex)
		}
		return r, nil
	}
	return 0, p.errorf("invalid escape \\%c", c)
}

// SplitKargs splits a kernel command line (a boot loader entry's options)
// at spaces outside double quotes, as the kernel does.
func SplitKargs(line string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case (r == ' ' || r == '\t') && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
