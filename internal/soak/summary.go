package soak

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// faultKinds is the order faults are listed in.
var faultKinds = []string{killWorker, stopWorker, killMaster, pluginCrash, pluginHang, failEvery, hangEvery, silent, delayed,
	split, childLost, killChild, stopChild, relayed, killRelay, stopRelay}

// defect is one finding of one run, with how to replay it.
type defect struct {
	Run    int
	Seed   uint64
	Kind   string
	Detail string
	Replay string
	Logs   string
}

// tally sums the runs for the summary.
type tally struct {
	cfg         *Config
	runs        int
	faults      map[string]int
	defects     []defect
	took        time.Duration
	interrupted bool
	exhausted   int     // runs that failed as designed (result.Exhausted)
	peakRSS     int64   // the largest esrun peak RSS
	worstRatio  float64 // the largest run time over its bound
	// splitRuns are the runs whose master may split (-split), splitDid
	// those in which one did; relayRuns the runs with a relay.
	splitRuns, splitDid, relayRuns int
}

func newTally(cfg *Config) *tally { return &tally{cfg: cfg, faults: map[string]int{}} }

// add counts a finished run.
func (t *tally) add(res result) {
	t.runs++
	for k, n := range res.Faults {
		t.faults[k] += n
	}
	for _, f := range res.Findings {
		t.defects = append(t.defects, defect{Run: res.Run, Seed: res.Scenario.Seed, Kind: f.Kind, Detail: f.Detail,
			Replay: t.cfg.replay(res.Scenario.Seed), Logs: res.Logs})
	}
	if res.Exhausted != "" {
		t.exhausted++
	}
	if res.Scenario.Split != "" {
		t.splitRuns++
		if res.Faults[split] > 0 {
			t.splitDid++
		}
	}
	if res.Scenario.Relay != nil {
		t.relayRuns++
	}
	t.peakRSS = max(t.peakRSS, res.PeakRSS)
	if res.Bound.Total > 0 {
		t.worstRatio = max(t.worstRatio, float64(res.Took)/float64(res.Bound.Total))
	}
}

// line is a run's progress line.
func (t *tally) line(res result) string {
	verdict := "ok"
	if res.Exhausted != "" {
		verdict = "ok, failed as designed (" + res.Exhausted + ")"
	}
	if len(res.Findings) > 0 {
		var kinds []string
		for _, f := range res.Findings {
			kinds = append(kinds, f.Kind)
		}
		verdict = "DEFECT " + strings.Join(kinds, ", ")
	}
	rss := "esrun peak RSS " + mib(res.PeakRSS)
	if res.PeakRSS == 0 {
		rss = "esrun peak RSS unknown (killed)"
	}
	return fmt.Sprintf("run %d seed %d: %s; %v of bound %v; %s; faults: %s; %s",
		res.Run, res.Scenario.Seed, verdict, res.Took.Round(time.Millisecond), res.Bound, rss,
		countList(res.Faults, faultKinds), res.Scenario)
}

// countList writes counts in the order of kinds, then any other, "none"
// when all are zero.
func countList(counts map[string]int, kinds []string) string {
	var parts []string
	seen := map[string]bool{}
	for _, k := range kinds {
		seen[k] = true
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	var rest []string
	for k := range counts {
		if !seen[k] && counts[k] > 0 {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// summary is the soak's final report.
func (t *tally) summary() string {
	var b strings.Builder
	state := ""
	if t.interrupted {
		state = " (interrupted)"
	}
	fmt.Fprintf(&b, "\nessoak summary%s: runs %d in %v, seeds %d..%d; load average %s\n",
		state, t.runs, t.took.Round(time.Second), t.cfg.Seed, t.cfg.Seed+uint64(max(t.runs, 1)-1), loadAverage())
	total := 0
	for _, n := range t.faults {
		total += n
	}
	fmt.Fprintf(&b, "faults injected: %d: %s\n", total, countList(t.faults, faultKinds))
	fmt.Fprintf(&b, "  (%s, %s, %s and %s count the workers started with them; %s the promotions to a child master and %s the children counted lost,\n", hangEvery, silent, delayed, relayed, split, childLost)
	b.WriteString("  as the masters logged them; the others count the faults that happened)\n")
	fmt.Fprintf(&b, "runs with -split: %d, of which %d split; runs with a relay: %d\n", t.splitRuns, t.splitDid, t.relayRuns)
	if t.exhausted > 0 {
		fmt.Fprintf(&b, "failed as designed: %d runs (a task failed more often than -max-retries allows, every failure injected)\n", t.exhausted)
	}
	fmt.Fprintf(&b, "longest run: %.0f%% of its bound; esrun peak RSS at most %s (bound %d MiB)\n", 100*t.worstRatio, mib(t.peakRSS), t.cfg.MaxRSS)
	byKind := map[string]int{}
	runs := map[int]bool{}
	for _, d := range t.defects {
		byKind[d.Kind]++
		runs[d.Run] = true
	}
	fmt.Fprintf(&b, "defects: %d in %d of the runs", len(t.defects), len(runs))
	if len(t.defects) > 0 {
		fmt.Fprintf(&b, ": %s", countList(byKind, nil))
	}
	b.WriteString("\n")
	for _, d := range t.defects {
		fmt.Fprintf(&b, "  run %d seed %d: %s: %s\n    replay: %s\n    logs: %s\n", d.Run, d.Seed, d.Kind, d.Detail, d.Replay, d.Logs)
	}
	return b.String()
}

// loadAverage is the machine's load over 1, 5 and 15 minutes.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}
