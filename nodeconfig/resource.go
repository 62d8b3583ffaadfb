package nodeconfig

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"slices"
	"strings"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/vincent-petithory/dataurl"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// hasSource reports whether a resource names content. Ignition treats an
// empty source like an absent one.
func hasSource(r ign.Resource) bool {
	return r.Source != nil && *r.Source != ""
}

// decodeResource returns the bytes a resource stands for. Only data: URLs
// are accepted: a build must not depend on a server being up, and the same
// inputs must always give the same image. More than limit bytes are
// refused with contentTooLarge (a "Too long" error); gzip data is
// decompressed no further than one byte past limit.
func decodeResource(r ign.Resource, fldPath *field.Path, limit int64) ([]byte, *field.Error) {
	src := *r.Source
	u, err := url.Parse(src)
	if err != nil {
		return nil, field.Invalid(fldPath.Child("source"), short(src), "not a valid URL")
	}
	if u.Scheme != "data" {
		return nil, field.Invalid(fldPath.Child("source"), short(src),
			fmt.Sprintf("remote sources (%s) are not supported: builds must be reproducible and work offline; inline the content as a data: URL", u.Scheme))
	}
	data, ok := fastDataURL(src)
	if !ok {
		du, err := dataurl.DecodeString(src)
		if err != nil {
			return nil, field.Invalid(fldPath.Child("source"), short(src), "not a valid data URL: "+err.Error())
		}
		data = du.Data
	}
	if r.Compression != nil && *r.Compression == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, field.Invalid(fldPath.Child("compression"), "gzip", "content is not gzip data: "+err.Error())
		}
		out, err := gunzip(zr, gzipSizeHint(data), limit)
		if err == nil {
			err = zr.Close()
		}
		if err != nil {
			return nil, field.Invalid(fldPath.Child("compression"), "gzip", "content is not valid gzip data: "+err.Error())
		}
		data = out
	} else if r.Compression != nil && *r.Compression != "" {
		return nil, field.NotSupported(fldPath.Child("compression"), *r.Compression, []string{"gzip"})
	}
	if int64(len(data)) > limit {
		return nil, contentTooLarge(fldPath)
	}
	if r.Verification.Hash != nil {
		if ferr := verify(data, *r.Verification.Hash, fldPath.Child("verification", "hash")); ferr != nil {
			return nil, ferr
		}
	}
	return data, nil
}

// gzipSizeHint is the length a gzip stream says its content has (its
// trailer's ISIZE): a hint only, as it is the last member's length
// modulo 4 GiB, and the stream may lie.
func gzipSizeHint(data []byte) int64 {
	if len(data) < 4 {
		return 0
	}
	return int64(binary.LittleEndian.Uint32(data[len(data)-4:]))
}

// gunzip reads zr no further than one byte past limit into a buffer of
// the hinted size: content read into a growing buffer was allocated
// about twice over, and every controller that validates a config decodes
// it. A short hint grows the buffer; a long one costs at most limit.
func gunzip(zr io.Reader, hint, limit int64) ([]byte, error) {
	r := io.LimitReader(zr, limit+1)
	out := make([]byte, 0, min(hint, limit)+1)
	for {
		if len(out) == cap(out) {
			if int64(len(out)) > limit {
				return out, nil
			}
			out = slices.Grow(out, len(out))
		}
		n, err := r.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// verify checks content against an Ignition hash (sha256-HEX or
// sha512-HEX) over the decompressed content, as Ignition does. Checking at
// render time turns a wrong hash into a render error instead of a node that
// fails to apply its configuration.
func verify(data []byte, want string, fldPath *field.Path) *field.Error {
	algo, sum, ok := strings.Cut(want, "-")
	var h hash.Hash
	switch {
	case ok && algo == "sha256":
		h = sha256.New()
	case ok && algo == "sha512":
		h = sha512.New()
	default:
		return field.Invalid(fldPath, want, "must be sha256-<hex> or sha512-<hex>")
	}
	h.Write(data)
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(sum) {
		return field.Invalid(fldPath, want, fmt.Sprintf("content does not match: its hash is %s-%s", algo, got))
	}
	return nil
}

// fastDataURL decodes the common forms of data URLs ("data:,text",
// "data:;base64,...", "data:text/plain;charset=utf-8;base64,...") the way
// dataurl does, without its lexer, which runs a goroutine per URL and
// dominated rendering. It reports false for anything else, which then goes
// through dataurl (as Ignition does).
func fastDataURL(src string) ([]byte, bool) {
	rest, ok := strings.CutPrefix(src, "data:")
	if !ok {
		return nil, false
	}
	header, data, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, false
	}
	header, b64 := strings.CutSuffix(header, ";base64")
	for i := 0; i < len(header); i++ {
		c := header[i]
		if ('a' > c || c > 'z') && ('A' > c || c > 'Z') && ('0' > c || c > '9') && strings.IndexByte("/.+-;=", c) < 0 {
			return nil, false
		}
	}
	if b64 {
		out, err := base64.StdEncoding.DecodeString(data)
		return out, err == nil
	}
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c >= 0x80:
			return nil, false
		case c == '%':
			if i+2 >= len(data) || !isHex(data[i+1]) || !isHex(data[i+2]) {
				return nil, false
			}
			out = append(out, unhex(data[i+1])<<4|unhex(data[i+2]))
			i += 2
		default:
			out = append(out, c)
		}
	}
	return out, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
