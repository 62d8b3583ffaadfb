package vm

import (
	"reflect"
	"testing"
)

func TestParseMarkers(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		want      []Marker
	}{
		{"none", "", nil},
		{"one without a probe", "STRATA-MARKER multi-user boot_id=b1 deployment=abc.0 probe=no\n",
			[]Marker{{Name: "multi-user", BootID: "b1", Deployment: "abc.0"}}},
		{"a probe not yet ended", "STRATA-MARKER multi-user boot_id=b1 deployment=abc.0 probe=yes\nSTRATA-PROBE x\n", nil},
		{"a probe ended", "STRATA-MARKER multi-user boot_id=b1 deployment=abc.0 probe=yes\nSTRATA-PROBE x=1\r\nSTRATA-PROBE y\nSTRATA-PROBE-END b1\n",
			[]Marker{{Name: "multi-user", BootID: "b1", Deployment: "abc.0", Probe: []string{"x=1", "y"}}}},
		{"a reset in a probe, then the next boot", "STRATA-MARKER multi-user boot_id=b1 deployment=a.0 probe=yes\nSTRATA-PRO\x00\x00STRATA-MARKER multi-user boot_id=b2 deployment=b.0 probe=no\n",
			[]Marker{{Name: "multi-user", BootID: "b2", Deployment: "b.0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseMarkers([]byte(tc.log)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
