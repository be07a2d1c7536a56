package localgrid

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/sched"
)

// A grid of two local agents of two slots evaluates a batch through the
// master; its timeline holds every instance, the caller's OnInstance
// sees them too, and a final Close ends the agents without error.
func TestLocalGridEvaluates(t *testing.T) {
	leaktest.Check(t)
	key := newKey(t)
	seen := make(chan sched.Instance, 100)
	g, err := Start(Config{
		Master: grid.MasterConfig{Listen: "127.0.0.1:0", Key: key, Policy: "wq",
			Problem: grid.ProblemSpec{Name: "sphere", Dim: 2},
			Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
			Ledger:  sched.LedgerConfig{OnInstance: func(in sched.Instance) { seen <- in }}},
		Gossip: "127.0.0.1:0",
		Local:  2,
		Slots:  func(string) int { return 2 },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(false)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := g.WaitWorkers(ctx, 2, false, func(int) {}); err != nil {
		t.Fatal(err)
	}
	if len(g.Agents()) != 2 {
		t.Fatalf("%d agents", len(g.Agents()))
	}
	xs := [][]float64{{1, 2}, {0, 0}, {3, 4}, {1, 1}, {2, 0}}
	vals, err := g.Master().Evaluate(ctx, 0, xs)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range xs {
		if want := x[0]*x[0] + x[1]*x[1]; vals[i] != want {
			t.Errorf("task %d: %v, want %v", i, vals[i], want)
		}
	}
	if err := g.Close(true); err != nil {
		t.Fatal(err)
	}
	if tl := g.Timeline().Record(0, 0); len(tl.Instances) < len(xs) || len(seen) != len(tl.Instances) {
		t.Errorf("timeline of %d instances, %d seen, for %d tasks", len(tl.Instances), len(seen), len(xs))
	}
	// The report's schedule: the policy, both workers by name, the
	// timeline and the (absent) splits.
	sc := g.Schedule(0, "off")
	if sc.Policy != "wq" || len(sc.PerWorker) != 2 || sc.PerWorker[0].Name == "" || sc.Timeline == nil || sc.Masters == nil || sc.Masters.Rule != "off" {
		t.Errorf("schedule %+v", sc)
	}
}

// An address in use is an AddrError naming which.
func TestLocalGridAddrInUse(t *testing.T) {
	leaktest.Check(t)
	key := newKey(t)
	first, err := Start(Config{Master: grid.MasterConfig{Listen: "127.0.0.1:0", Key: key, Policy: "wq",
		Problem: grid.ProblemSpec{Name: "sphere", Dim: 2}}, Gossip: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(false)
	_, err = Start(Config{Master: grid.MasterConfig{Listen: first.Master().Addr(), Key: key, Policy: "wq",
		Problem: grid.ProblemSpec{Name: "sphere", Dim: 2}}, Gossip: "127.0.0.1:0"})
	var ae *AddrError
	if !errors.As(err, &ae) || ae.What != "listen" {
		t.Fatalf("%v, want an AddrError of listen", err)
	}
}

func newKey(t *testing.T) *grid.Key {
	t.Helper()
	secret, err := grid.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := grid.NewKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// The key made for a run is saved readable by the user only.
func TestSaveRunKey(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	path, err := SaveRunKey("secret")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v", path, fi.Mode(), err)
	}
	if b, _ := os.ReadFile(path); string(b) != "secret\n" {
		t.Errorf("key file holds %q", b)
	}
}
