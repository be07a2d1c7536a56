package grid

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/sched"
)

// The master remembers each worker's name and host, for the report, after
// the worker has gone and after the master has closed.
func TestWorkerInfo(t *testing.T) {
	leaktest.Check(t)
	key, _ := NewKey(testSecret("a long shared secret"))
	m, err := NewMaster(context.Background(), MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Problem: ProblemSpec{Name: "sphere", Dim: 2},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ids []int32
	for _, name := range []string{"lab-7", "lab-8"} {
		c, w, err := Dial(ctx, m.Addr(), DialConfig{Key: key, Name: name, Slots: 1,
			Conn: ConnConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.Worker)
		c.Close()
		<-c.Done()
	}
	m.Close()
	for i, name := range []string{"lab-7", "lab-8"} {
		wi, ok := m.WorkerInfo(sched.WorkerID(ids[i]))
		if !ok || wi.Name != name || wi.Host != "127.0.0.1" {
			t.Errorf("WorkerInfo(%d) = %+v, %v; want %s on 127.0.0.1", ids[i], wi, ok, name)
		}
	}
	if _, ok := m.WorkerInfo(999); ok {
		t.Error("WorkerInfo of an id never given")
	}
}

// The book keeps connected workers and the last keepDeparted that left.
func TestWorkerBookBounded(t *testing.T) {
	var b workerBook
	b.add(0, "stayer", nil)
	for i := 1; i <= 3*keepDeparted; i++ {
		b.add(sched.WorkerID(i), "visitor", nil)
		b.left(sched.WorkerID(i))
	}
	if _, ok := b.byID[0]; !ok {
		t.Error("a connected worker was forgotten")
	}
	if len(b.byID) != keepDeparted+1 || len(b.departed) != keepDeparted {
		t.Errorf("book of %d workers, %d departed; want %d and %d", len(b.byID), len(b.departed), keepDeparted+1, keepDeparted)
	}
	if _, ok := b.byID[3*keepDeparted]; !ok {
		t.Error("the last worker to leave was forgotten")
	}
	b.left(99999) // never joined: nothing
	if len(b.departed) != keepDeparted {
		t.Error("an unknown id was recorded")
	}
}
