package worker

import "strings"

// Workers behind a relay (docs/papers.md §1's W1–W3 behind R1) are started
// with the relay's address as their master's (esworker -master); they do
// not join gossip, since the peers that would probe them cannot reach
// them (the relay speaks for them: see grid/relay.go). Config.Master may
// list other paths after the relay's: when the relay dies, each failed
// connection moves on to the next address, so a worker reconnects
// through another relay, or straight to the master, or waits.

// pickAddr is the attempt-th address of a comma-separated list (in turn).
func pickAddr(list string, attempt int) string {
	if !strings.Contains(list, ",") {
		return strings.TrimSpace(list)
	}
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return ""
	}
	return addrs[max(attempt, 0)%len(addrs)]
}
