package livepage

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/sched"
)

// fakeMaster is a master's view for the status page's unit tests.
type fakeMaster struct {
	workers []grid.WorkerStat
	info    map[sched.WorkerID]grid.WorkerInfo
	now     time.Duration
	out     []grid.OutInstance
}

func (f *fakeMaster) WorkerStats() []grid.WorkerStat { return f.workers }
func (f *fakeMaster) WorkerInfo(id sched.WorkerID) (grid.WorkerInfo, bool) {
	i, ok := f.info[id]
	return i, ok
}
func (f *fakeMaster) Outstanding(limit int) (time.Duration, []grid.OutInstance, int) {
	if len(f.out) > limit {
		return f.now, f.out[:limit], len(f.out) - limit
	}
	return f.now, f.out, 0
}

func TestLiveStatus(t *testing.T) {
	f := &fakeMaster{
		workers: []grid.WorkerStat{
			{ID: 2, Name: "b", Slots: 2, Outstanding: 3},
			{ID: 1, Name: "a", Slots: 4, Draining: true},
			{ID: 4, Name: "d", Slots: 1, Aside: true, Late: true},
		},
		info: map[sched.WorkerID]grid.WorkerInfo{1: {Name: "a", Host: "10.0.0.1"}, 2: {Name: "b", Host: "10.0.0.2"}, 3: {Name: "c", Host: "10.0.0.3"}, 4: {Name: "d", Host: "10.0.0.4"}},
		now:  5 * time.Second,
		out: []grid.OutInstance{
			{Worker: 2, Task: 7, Sent: 3 * time.Second, Started: 4 * time.Second},
			{Worker: 2, Task: 8, Sent: 4 * time.Second, Started: -1},
		},
	}
	l := New("wq", "ridge")
	l.master = f
	s := 1 * time.Second
	l.Instance(sched.Instance{Worker: 1, Task: 0, Gen: 0, Known: true, Kind: sched.InstanceFinished, Start: 0, End: s}) // an older generation
	l.Instance(sched.Instance{Worker: 1, Task: 1, Gen: 1, Known: true, Kind: sched.InstanceFinished, Start: s, End: 2 * s})
	l.Instance(sched.Instance{Worker: 3, Task: 2, Gen: 1, Known: true, Replica: true, Kind: sched.InstanceFinished, Start: s, End: 3 * s})
	l.Instance(sched.Instance{Worker: 2, Task: 3, Gen: 1, Known: true, Kind: sched.InstanceCancelledRunning, Start: 2 * s, End: 3 * s})
	l.Instance(sched.Instance{Worker: 2, Task: 4, Gen: 1, Known: true, Kind: sched.InstanceFailed, Start: 2 * s, End: 2 * s})
	l.Instance(sched.Instance{Worker: 1, Task: 5, Gen: 0, Known: true, Kind: sched.InstanceFinished, Start: 0, End: s}) // late: dropped

	st := l.status()
	var names, states []string
	for _, w := range st.Workers {
		names, states = append(names, w.Name), append(states, w.State)
	}
	if got, want := strings.Join(names, ","), "a,b,d,c"; got != want {
		t.Errorf("rows %s, want %s (connected by name, then those that left)", got, want)
	}
	if got, want := strings.Join(states, ","), "draining,working,set aside,left"; got != want {
		t.Errorf("states %s, want %s", got, want)
	}
	if w := st.Workers[1]; w.Host != "10.0.0.2" || w.Busy != 2 || w.Held != 1 || w.Results != 0 {
		t.Errorf("worker b %+v: want host 10.0.0.2, 2 busy (its slots), 1 held, no results", w)
	}
	if st.Workers[0].Results != 1 || st.Workers[3].Results != 1 {
		t.Errorf("results this generation: a %d, c %d, want 1 each", st.Workers[0].Results, st.Workers[3].Results)
	}
	var bars []string
	for _, in := range st.Instances {
		bars = append(bars, fmt.Sprintf("%d:%s:%g-%g", in.W, in.Kind, in.Start, in.End))
	}
	// The window starts at the generation's first instance (1 s).
	want := "0:original:0-1 3:replica:0-2 1:cancelled:1-2 1:failed:1-1 1:running:3-4 1:held:3-4"
	if got := strings.Join(bars, " "); got != want || st.Now != 4 {
		t.Errorf("bars %s, now %g\nwant %s, now 4", got, st.Now, want)
	}

	// The JSON's shape, as the page reads it.
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"policy", "problem", "gen", "of", "evals", "evals_per_s", "eta_s", "best", "started",
		"workers", "more_workers", "states", "now", "instances", "more_instances"} {
		if _, ok := m[k]; !ok {
			t.Errorf("status.json has no %q: %s", k, b)
		}
	}
	if m["of"] != nil || m["eta_s"] != nil || m["best"] != nil || m["started"] != false {
		t.Errorf("before generation 0: of, eta_s, best = %v, %v, %v, started %v; want null and false", m["of"], m["eta_s"], m["best"], m["started"])
	}
}

// TestLiveStatusBounded: a grid of 4096 workers, with 10^5 instances
// ended and 10^4 running, makes a status of bounded size that says what it
// left out.
func TestLiveStatusBounded(t *testing.T) {
	const workers, ended, running = 4096, 100_000, 10_000
	f := &fakeMaster{info: map[sched.WorkerID]grid.WorkerInfo{}, now: time.Hour}
	for i := range workers {
		id := sched.WorkerID(i + 1)
		name := fmt.Sprintf("worker-%04d.cluster.example.org", i)
		f.workers = append(f.workers, grid.WorkerStat{ID: id, Name: name, Slots: 64, Outstanding: 3})
		f.info[id] = grid.WorkerInfo{Name: name, Host: "10.1.2.3"}
	}
	for i := range running {
		f.out = append(f.out, grid.OutInstance{Worker: sched.WorkerID(i%workers + 1), Task: i, Sent: time.Minute, Started: time.Minute})
	}
	l := New("r3q", "ridge")
	l.master = f
	for i := range ended {
		l.Instance(sched.Instance{Worker: sched.WorkerID(i%workers + 1), Task: sched.TaskID(i), Gen: 3, Known: true,
			Kind: sched.InstanceFinished, Start: time.Minute, End: 2 * time.Minute})
	}
	st := l.status()
	if len(st.Workers) != maxLiveWorkers || st.MoreWorkers != workers-maxLiveWorkers || st.States["working"] != workers {
		t.Errorf("%d workers listed, %d more, states %v; want %d, %d, all %d working", len(st.Workers), st.MoreWorkers, st.States, maxLiveWorkers, workers-maxLiveWorkers, workers)
	}
	if len(st.Instances) > maxLiveInstances || len(st.Instances)+st.MoreInstance != ended+running {
		t.Errorf("%d instances drawn, %d more: want at most %d, %d in all", len(st.Instances), st.MoreInstance, maxLiveInstances, ended+running)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status.json: %d bytes", len(b))
	if len(b) > 200<<10 {
		t.Errorf("status.json is %d bytes, want at most 200 KiB", len(b))
	}
}

func TestLivePageHandler(t *testing.T) {
	l := New("wq", "ridge")
	srv := httptest.NewServer(l.Handler())
	defer srv.Close()
	resp, page := request(t, "GET", srv.URL+"/")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(page, "status.json") {
		t.Errorf("GET /: %s, headers %v", resp.Status, resp.Header)
	}
	// No external assets: every src and href is relative.
	for _, m := range regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?([^"'\s>]*)`).FindAllStringSubmatch(page, -1) {
		if strings.Contains(m[2], "//") {
			t.Errorf("the page loads %s=%s", m[1], m[2])
		}
	}
	if strings.Contains(page, "@import") || strings.Contains(page, "url(") {
		t.Error("the page's CSS loads something")
	}

	resp, body := request(t, "GET", srv.URL+"/status.json")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" ||
		resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("GET /status.json: %s, headers %v", resp.Status, resp.Header)
	}
	var st liveStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Policy != "wq" || st.Workers == nil || st.Instances == nil {
		t.Errorf("status.json before the grid is up: %v, %s", err, body)
	}

	for _, c := range []struct {
		method, path string
		code         int
	}{{"POST", "/", 405}, {"PUT", "/status.json", 405}, {"GET", "/other", 404}, {"HEAD", "/", 200}} {
		if resp, _ := request(t, c.method, srv.URL+c.path); resp.StatusCode != c.code {
			t.Errorf("%s %s: %s, want %d", c.method, c.path, resp.Status, c.code)
		}
	}
}
