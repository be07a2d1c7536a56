package metrics

import (
	"strings"
	"testing"
)

// A run's name is 1 to MaxRunName letters, digits and . _ - :.
func TestValidRunName(t *testing.T) {
	for _, s := range []string{"a", "lab-7", "x.y_z:1", strings.Repeat("n", MaxRunName)} {
		if !ValidRunName(s) {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{"", "a b", "a/b", `a"b`, "é", strings.Repeat("n", MaxRunName+1)} {
		if ValidRunName(s) {
			t.Errorf("%q accepted", s)
		}
	}
}
