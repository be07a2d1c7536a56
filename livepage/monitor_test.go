package livepage

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/localgrid"
	"github.com/esgrid/esgrid/metrics"
)

// A run's id is random and its name defaults to the problem and the id's
// first 8 hex digits; a given name replaces the name only.
func TestMonitorIdentity(t *testing.T) {
	a, b := NewMonitor("", "wq", "ridge"), NewMonitor("", "wq", "ridge")
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(a.ID) || a.ID == b.ID {
		t.Errorf("run ids %q and %q: want 16 hex digits, each run its own", a.ID, b.ID)
	}
	if a.Name != "ridge-"+a.ID[:8] {
		t.Errorf("default run name %q for id %s", a.Name, a.ID)
	}
	if c := NewMonitor("lab-7", "wq", "ridge"); c.Name != "lab-7" || len(c.ID) != 16 {
		t.Errorf("name lab-7: name %q, id %q", c.Name, c.ID)
	}
}

// A nil Monitor (a run without metrics) does nothing and feeds no one.
func TestMonitorNil(t *testing.T) {
	var m *Monitor
	if m.OnInstance() != nil || m.OnGeneration() != nil || m.Serving() {
		t.Error("a nil Monitor gives callbacks or serves")
	}
	if err := m.Register(nil, metrics.RunInfo{}); err != nil {
		t.Error(err)
	}
	m.Progress(es.Stats{}, nil)
	m.Close(time.Hour) // returns at once
}

// A Monitor of a real local grid serves the run's metrics, labelled
// with its name and id, and its local agents', and the status page;
// Close stops the server.
func TestMonitorServesGrid(t *testing.T) {
	leaktest.Check(t)
	secret, err := grid.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := grid.NewKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMonitor("lab-7", "wq", "sphere")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := localgrid.Start(localgrid.Config{
		Master: grid.MasterConfig{Listen: "127.0.0.1:0", Key: key, Policy: "wq",
			Problem: grid.ProblemSpec{Name: "sphere", Dim: 2}, Logger: log},
		Gossip: "127.0.0.1:0", Local: 1, Slots: func(string) int { return 1 },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(false)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := g.WaitWorkers(ctx, 1, false, func(int) {}); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(g, metrics.RunInfo{Seed: 3, Policy: "wq", Problem: "sphere", Strategy: "es"}); err != nil {
		t.Fatal(err)
	}
	addr, err := m.Serve("127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(0)
	body := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{`run="lab-7"`, `run_id="` + m.ID + `"`, "esgrid_worker_slots{"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if page := get(t, "http://"+addr+"/"); !strings.Contains(page, "<html") {
		t.Errorf("/ is not the status page: %.200s", page)
	}
	m.Close(0)
	if m.Serving() {
		t.Error("still serving after Close")
	}
}

// get is the body of a GET of url.
func get(t *testing.T, url string) string {
	t.Helper()
	_, body := request(t, "GET", url)
	return body
}

// request makes a request of method to url and returns the response and
// its body, read whole.
func request(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}
