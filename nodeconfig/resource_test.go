package nodeconfig

import (
	"bytes"
	"testing"

	"github.com/vincent-petithory/dataurl"
)

// FuzzDataURL checks that the fast data URL decoder agrees with dataurl,
// which Ignition uses, on everything it claims to handle.
func FuzzDataURL(f *testing.F) {
	for _, s := range []string{"data:,a%20b", "data:;base64,aGk=", "data:text/plain;charset=utf-8;base64,aGk=",
		"data:,%zz", "data:,caf\xc3\xa9", "data:a;b=c,x", "data:;base64,!!", "data:,100%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		fast, ok := fastDataURL(src)
		if !ok {
			return
		}
		du, err := dataurl.DecodeString(src)
		if err != nil {
			// Ignition refuses these before the decoder ever sees them.
			return
		}
		if !bytes.Equal(fast, du.Data) {
			t.Fatalf("%q: fast %q, dataurl %q", src, fast, du.Data)
		}
	})
}
