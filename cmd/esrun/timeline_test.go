package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/report"
	"github.com/esgrid/esgrid/worker"
)

// A real run on a local grid that a remote worker leaves partway: the
// report's timeline has every worker's instances, agrees with the
// report's counters, and says when the remote worker left.
func TestReportTimeline(t *testing.T) {
	leaktest.Check(t)
	path := filepath.Join(t.TempDir(), "run.json")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout, stderr, wait := esrunAsync(ctx, "-problem", "rastrigin", "-dim", "6", "-mu", "5", "-lambda", "24", "-gens", "1000000", "-load-ms", "5",
		"-local", "1", "-slots", "1", "-min-workers", "2", "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0", "-key", testSecret, "-report", path)
	m := stderr.await(t, listeningLine)
	key, err := grid.LoadKey(testSecret, "", false)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := worker.New(worker.Config{
		Join: []string{m[3] + ":" + m[4]}, GossipBind: "127.0.0.1:0", Key: key, Name: "remote", Slots: 2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	agentCtx, leave := context.WithCancel(ctx)
	defer leave()
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); agent.Run(agentCtx) }()
	// It works for a few generations, leaves, and the run goes on
	// without it for a few more.
	stdout.await(t, regexp.MustCompile(`(?m)^gen +3[/ ]`))
	leave()
	<-agentDone
	stderr.await(t, regexp.MustCompile(`worker (lost|disconnected)[^\n]*remote`))
	n := len(regexp.MustCompile(`(?m)^gen `).FindAllString(stdout.String(), -1))
	stdout.await(t, regexp.MustCompile(`(?m)^gen +`+strconv.Itoa(n+3)+`[/ ]`))
	cancel()
	wait()

	r := readReport(t, path+report.PartialSuffix)
	s := r.Schedule
	if s == nil || s.Timeline == nil || len(s.PerWorker) != 2 {
		t.Fatalf("schedule %+v", s)
	}
	tl := s.Timeline
	if tl.Limit != report.MaxTimeline || len(tl.Instances) > report.MaxTimeline || tl.Omitted > 0 && tl.FromGen == 0 {
		t.Errorf("timeline limit %d, %d instances, from generation %d, %d omitted", tl.Limit, len(tl.Instances), tl.FromGen, tl.Omitted)
	}
	left := map[int]*float64{}
	names := map[int]string{}
	end := s.Generations[len(s.Generations)-1].End // the run's end on the generations' clock
	for _, w := range s.PerWorker {
		left[w.Worker], names[w.Worker] = w.Left, w.Name
		switch {
		case w.Name == "remote" && (w.Left == nil || *w.Left >= end || *w.Left <= w.Joined):
			t.Errorf("remote worker: joined %v, left %v; want it to leave before the end %v", w.Joined, w.Left, end)
		case w.Name == "local-1" && w.Left != nil:
			t.Errorf("local worker left at %v; it stayed to the end", *w.Left)
		}
	}
	kinds := map[string]int{}
	perWorker := map[string]int{}
	for _, in := range tl.Instances {
		kinds[in.Kind]++
		l, ok := left[in.Worker]
		switch {
		case !ok:
			t.Fatalf("instance of worker %d, which the report does not list", in.Worker)
		case in.End < in.Start:
			t.Errorf("instance %+v ends before it starts", in)
		case l != nil && in.End > *l:
			t.Errorf("instance %+v of %s ends after it left at %v", in, names[in.Worker], *l)
		}
		perWorker[names[in.Worker]]++
	}
	accepted := 0
	for _, w := range s.PerWorker {
		accepted += w.Accepted
	}
	finished := kinds["original"] + kinds["replica"]
	executed := finished + kinds["stale"] + kinds["cancelled_running"]
	if executed > s.Originals+s.Resends+s.Replicas || perWorker["local-1"] == 0 {
		t.Errorf("instances %v per worker %v; the report says %d originals, %d resends and %d replicas", kinds, perWorker, s.Originals, s.Resends, s.Replicas)
	}
	// Unless the run outran the limit (a loaded machine, a slow leave),
	// the timeline holds every instance the counters count.
	if tl.Omitted == 0 && (kinds["cancelled_held"] != s.CancelsHeld || kinds["cancelled_running"] != s.CancelsRunning ||
		finished < accepted || perWorker["remote"] == 0) {
		t.Errorf("instances %v per worker %v; the report says cancels %d held and %d running, %d accepted",
			kinds, perWorker, s.CancelsHeld, s.CancelsRunning, accepted)
	}
	t.Logf("%d generations, instances %v per worker %v, %d omitted", len(s.Generations), kinds, perWorker, tl.Omitted)
	if _, err := os.Stat(path); err == nil {
		t.Errorf("an interrupted run wrote %s", path)
	}
}
