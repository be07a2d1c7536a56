package strictjson

import (
	"strings"
	"testing"
)

// A key given twice is found at any depth and named with where it is; the
// same key in two objects is not a duplicate; what does not decode is
// left to the decoder.
func TestDuplicateKeys(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"slots": 2, "slots": 40000}`, `key "slots" given twice`},
		{`{"plugins": {"a": "/x", "b": "/y", "a": "/z"}}`, `key "a" given twice, in plugins`},
		{`{"workers": [{"name": "a", "slots": 1}, {"name": "b", "slots": 1, "slots": 2}]}`, `key "slots" given twice, in workers[1]`},
		{`{"a": [[1, 2], {"x": 1, "y": {"z": 1, "z": 2}}]}`, `key "z" given twice, in a[1].y`},
		{`{"workers": [{"name": "a"}, {"name": "b"}], "groups": [{"name": "a"}]}`, ""},
		{`{"a": {"b": 1}, "b": {"a": 1}}`, ""},
		{`[1, {"a": 1}, {"a": 2}]`, ""},
		{`{"a": 1,`, ""},
		{`not json`, ""},
		{strings.Repeat("[", 100) + strings.Repeat("]", 100), "nested deeper than 64"},
	} {
		err := DuplicateKeys([]byte(tt.in))
		if got := ""; err != nil {
			got = err.Error()
			if got != tt.want {
				t.Errorf("%.40s: %q, want %q", tt.in, got, tt.want)
			}
		} else if tt.want != "" {
			t.Errorf("%.40s: nil, want %q", tt.in, tt.want)
		}
	}
}
