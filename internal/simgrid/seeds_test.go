package simgrid

import (
	"strings"
	"testing"
)

// fixedSeeds are seeds that found a bug, kept so that it stays fixed.
// Each names what its trace showed.
var fixedSeeds = []struct {
	seed uint64
	why  string
}{
	{8, "verify=1, w0 frozen then back under a new id, w1 silent: every check instance of " +
		"generation 0 was overdue, so a check was sent again only if none was out; the silent " +
		"worker's instance stayed out for ever and the batch never ended (verify.go: a check " +
		"whose every instance is overdue is sent again, to a worker that joined since)"},
	{270, "verify=1, one healthy worker and two silent ones: every check waited for a worker to " +
		"join, since the silent ones counted as others that might answer, for ever; then, once " +
		"given up, every batch's checks went to the silent workers again and each cost four " +
		"deadlines (verify.go: a check with no answer possible in time stands unverified, and a " +
		"worker with an overdue check is asked none until it answers)"},
}

// TestFixedSeeds replays every seed that once found a bug.
func TestFixedSeeds(t *testing.T) {
	for _, fs := range fixedSeeds {
		sc, out, trace, bad := simulate(t, fs.seed)
		if len(bad) > 0 {
			t.Errorf("seed %d (%s) broke:\n  %s\nscenario: %s\nreplay: %s\ntrace (last lines):\n%s",
				fs.seed, fs.why, strings.Join(bad, "\n  "), sc, replay(fs.seed), tail(trace, 40))
			continue
		}
		t.Logf("seed %d: %v of virtual time, bound %v", fs.seed, out.Elapsed, Bound(sc))
	}
}
