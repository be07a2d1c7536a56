package metrics

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// NewRunID returns a run's id: 16 random hex digits. It names the run in
// its metrics only, and draws nothing from the ES's random source.
func NewRunID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// MaxRunName bounds a run's name (esrun -run-name).
const MaxRunName = 64

// ValidRunName accepts 1 to MaxRunName letters, digits and . _ - :, so
// that a run's name is a label value that reads the same in a URL, a
// dashboard's variable and a shell.
func ValidRunName(s string) bool {
	if s == "" || len(s) > MaxRunName {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-:", r)) {
			return false
		}
	}
	return true
}
