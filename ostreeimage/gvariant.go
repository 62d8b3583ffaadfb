package ostreeimage

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseGVariantString reads a string in GVariant text format, as `ostree
// show --print-metadata-key` prints one: in single or double quotes, with
// C-like backslash escapes and \uXXXX, \UXXXXXXXX.
func parseGVariantString(s string) (string, error) {
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') || s[len(s)-1] != s[0] {
		return "", fmt.Errorf("not a quoted GVariant string: %.40q", s)
	}
	quote, body := s[0], s[1:len(s)-1]
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == quote {
			return "", errors.New("unescaped quote in GVariant string")
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(body) {
			return "", errors.New("GVariant string ends in a backslash")
		}
		switch e := body[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'u', 'U':
			n := 4
			if e == 'U' {
				n = 8
			}
			if i+n >= len(body)+1 || i+1+n > len(body) {
				return "", errors.New("short unicode escape in GVariant string")
			}
			v, err := strconv.ParseUint(body[i+1:i+1+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", fmt.Errorf("invalid unicode escape %q in GVariant string", body[i+1:i+1+n])
			}
			b.WriteRune(rune(v))
			i += n
		default:
			// \\, \', \" and any other character stand for themselves.
			b.WriteByte(e)
		}
	}
	return b.String(), nil
}
