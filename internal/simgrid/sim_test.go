package simgrid

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"time"
)

var (
	seedFlag    = flag.Uint64("sim.seed", 0, "replay this one seed (0: search)")
	seedsFlag   = flag.Int("sim.seeds", 0, "search this many seeds from -sim.from (0: as many as -sim.budget allows)")
	fromFlag    = flag.Uint64("sim.from", 1, "the first seed of the search")
	budgetFlag  = flag.Duration("sim.budget", 0, "wall time the search may take (0: a default that depends on -short and -race)")
	traceFlag   = flag.Bool("sim.trace", false, "print the trace of every run, failing or not")
	replayFlag  = flag.Int("sim.replays", 16, "seeds TestReplayIsExact runs twice each")
	maxFailFlag = flag.Int("sim.maxfail", 5, "stop the search after this many failing seeds")
	splitFlag   = flag.Bool("sim.split", false, "search only the seeds whose master may split (a sixth of them, where a long search finds most)")
	faults2Flag = flag.Bool("sim.faults2", false, "draw each seed with DrawFaults2: one-way partitions, slow links, half-open crashes, names given twice")
)

// draw is the scenario of seed the flags ask for: Draw's, or with
// -sim.faults2 DrawFaults2's.
func draw(seed uint64) Scenario {
	if *faults2Flag {
		return DrawFaults2(seed)
	}
	return Draw(seed)
}

func init() {
	flag.BoolVar(&CheckWaiting, "sim.waiting", true, "fail a split run that leaves a worker looking for a master (see CheckWaiting)")
}

// simulate runs seed's scenario in a fresh bubble and returns its outcome,
// its trace and the invariants it broke.
func simulate(t *testing.T, seed uint64) (Scenario, *Outcome, string, []string) {
	sc := Draw(seed)
	out, trace, bad := simulateScenario(t, sc)
	return sc, out, trace, bad
}

// simulateScenario runs sc in a fresh bubble, as simulate does a seed's.
func simulateScenario(t *testing.T, sc Scenario) (*Outcome, string, []string) {
	ref, refFinal, err := Reference(sc)
	if err != nil {
		t.Fatalf("seed %d: in-process reference: %v", sc.Seed, err)
	}
	var trace lockedBuffer
	var out *Outcome
	synctest.Test(t, func(t *testing.T) {
		// Past twice its bound a run is stalled for good: stop it, so
		// that the test reports it rather than waiting for ever.
		ctx, cancel := context.WithTimeout(context.Background(), 2*Bound(sc))
		defer cancel()
		out = Run(ctx, sc, &trace)
	})
	return out, trace.String(), Check(sc, out, ref, refFinal, trace.String())
}

// replay is the one-line command that replays seed.
func replay(seed uint64) string {
	f := ""
	if *faults2Flag {
		f = " -sim.faults2"
	}
	return fmt.Sprintf("go test ./internal/simgrid -run 'TestSimulation$' -sim.seed=%d%s -sim.trace -v", seed, f)
}

// TestSimulation runs the real master and real worker agents in a
// simulated world (a virtual clock, a simulated network with delays,
// partitions and resets, workers that hang, fail, go silent, die, freeze,
// leave and join, and a master killed and resumed from its checkpoint)
// for as many seeds as its budget allows, and checks every run's
// invariants. A failing seed prints the command that replays it.
func TestSimulation(t *testing.T) {
	if *seedFlag != 0 {
		sc := draw(*seedFlag)
		out, trace, bad := simulateScenario(t, sc)
		if *traceFlag || len(bad) > 0 {
			t.Logf("%s\n%s", sc, trace)
		}
		for _, b := range bad {
			t.Errorf("seed %d: %s", *seedFlag, b)
		}
		t.Logf("seed %d: %v of virtual time (bound %v), %d generations, %d accepts", *seedFlag, out.Elapsed, Bound(sc), len(out.Trajectory), len(out.Accepts))
		return
	}
	budget := *budgetFlag
	if budget == 0 {
		// go test ./... stays short; .ci/run searches for two minutes
		// more (-sim.budget=2m), and a long search is -sim.budget=1h.
		budget = 10 * time.Second
		if testing.Short() || raceEnabled {
			budget = 3 * time.Second
		}
	}
	count := *seedsFlag
	began := time.Now()
	deadline := began.Add(budget)
	var ran, skipped, failed atomic.Int64
	var virtual atomic.Int64
	next := *fromFlag
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				seed := next
				stop := (count > 0 && seed >= *fromFlag+uint64(count)) || (count == 0 && time.Now().After(deadline))
				next++
				mu.Unlock()
				if stop || failed.Load() >= int64(*maxFailFlag) {
					return
				}
				sc := draw(seed)
				if *splitFlag && !sc.Split {
					skipped.Add(1)
					continue
				}
				out, trace, bad := simulateScenario(t, sc)
				ran.Add(1)
				virtual.Add(int64(out.Elapsed))
				if len(bad) > 0 {
					failed.Add(1)
					t.Errorf("seed %d broke %d invariants:\n  %s\nscenario: %s\nreplay: %s\ntrace (last lines):\n%s",
						seed, len(bad), strings.Join(bad, "\n  "), sc, replay(seed), tail(trace, 60))
				} else if *traceFlag {
					t.Logf("seed %d: %s\n%s", seed, sc, trace)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d seeds from %d (%d failed, %d without a split skipped), %v of virtual time in %v of wall time", ran.Load(), *fromFlag, failed.Load(),
		skipped.Load(), time.Duration(virtual.Load()).Round(time.Second), time.Since(began).Round(time.Second))
	if ran.Load() == 0 {
		t.Fatal("no seed ran")
	}
}

// TestReplayIsExact runs seeds twice each: one seed must replay one run:
// always the same trajectory and the same generations completed (the
// project's invariant: evolution does not depend on how it was
// evaluated), and in nearly every seed exactly: the same results
// accepted from the same workers in the same order, the run ending at the
// same virtual instant. Not always exactly: when one event wakes two
// goroutines at one virtual instant (a reset that a connection's reader
// and writer both see), they run in either order, and the run may then
// end a little earlier or later (seen in 4 seeds of 1,000, each run
// three times). The trace is not compared (TestExactSeeds compares it
// for the seeds that once replayed another run), nor the counts of
// instances sent and cancels answered (about 1 % of seeds).
func TestReplayIsExact(t *testing.T) {
	n := uint64(*replayFlag)
	if testing.Short() || raceEnabled {
		n = min(n, 4)
	}
	inexact := 0
	for seed := uint64(1); seed <= n; seed++ {
		_, a, ta, _ := simulate(t, seed)
		_, b, tb, _ := simulate(t, seed)
		if !slices.EqualFunc(a.Trajectory, b.Trajectory, sameStats) || !slices.Equal(a.Completed, b.Completed) {
			t.Errorf("seed %d did not replay its evolution: %s\nfirst difference of the traces:\n%s", seed, sameRun(a, b), firstDiff(ta, tb))
			continue
		}
		if diff := sameRun(a, b); diff != "" {
			inexact++
			t.Logf("seed %d replayed its evolution, not its schedule: %s\nfirst difference of the traces:\n%s", seed, diff, firstDiff(ta, tb))
		}
	}
	// One seed in eight (at least one) may meet a tie; more means replay
	// is broken.
	if inexact > max(1, int(n)/8) {
		t.Errorf("%d of %d seeds did not replay their schedule exactly", inexact, n)
	}
}

// sameRun says how two outcomes differ ("" when they do not).
func sameRun(a, b *Outcome) string {
	switch {
	case a.Elapsed != b.Elapsed:
		return fmt.Sprintf("%v vs %v of virtual time", a.Elapsed, b.Elapsed)
	case !slices.Equal(a.Accepts, b.Accepts):
		return "the accepted results differ"
	case !slices.EqualFunc(a.Trajectory, b.Trajectory, sameStats):
		return "the trajectories differ"
	case !slices.Equal(a.Completed, b.Completed):
		return "the generations completed differ"
	}
	return ""
}

// fingerprint sums up a whole run: when it ended, the results it
// accepted, its trajectory and its trace, the lines of each instant
// sorted (canonLines).
func fingerprint(out *Outcome, trace string) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%v\n%v\n%v\n%v\n", out.Elapsed, out.Accepts, out.Trajectory, out.Completed)
	for _, l := range canonLines(trace) {
		fmt.Fprintln(h, l)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// canonLines is the trace's lines, those of each instant sorted.
func canonLines(trace string) []string {
	lines := strings.Split(strings.TrimSpace(trace), "\n")
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && stamp(lines[j]) == stamp(lines[i]) {
			j++
		}
		slices.Sort(lines[i:j])
		i = j
	}
	return lines
}

func stamp(line string) string {
	s, _, _ := strings.Cut(line, " ")
	return s
}

func firstDiff(a, b string) string {
	la, lb := canonLines(a), canonLines(b)
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i, la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines vs %d", len(la), len(lb))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// lockedBuffer is a bytes.Buffer safe for the loggers' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
