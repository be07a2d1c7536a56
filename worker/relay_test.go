package worker

import "testing"

// A list of paths is tried in turn, spaces around its addresses ignored.
func TestPickAddr(t *testing.T) {
	for _, tc := range []struct {
		list    string
		attempt int
		want    string
	}{
		{"a:1, b:2 ,c:3", 4, "b:2"},
		{"a:1, b:2 ,c:3", -1, "a:1"},
		{" a:1 ", 3, "a:1"},
		{",", 0, ""},
	} {
		if got := pickAddr(tc.list, tc.attempt); got != tc.want {
			t.Errorf("pickAddr(%q, %d) = %q, want %q", tc.list, tc.attempt, got, tc.want)
		}
	}
}
