package grid

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// A cancel of more tasks than a frame may hold ids (a late worker's
// share of a large generation under cyclic, withdrawn at once) reaches
// the worker whole, in several frames: in one, the worker's decoder
// refused it and the connection broke ("cancel.ids: 70000 elements, want
// 0..65536"), the worker lost with its tasks.
func TestCancelOfManyTasksArrives(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	ctx := context.Background()
	ca, cb := NewConn(ctx, a, quietConfig()), NewConn(ctx, b, quietConfig())
	defer ca.Close()
	defer cb.Close()
	got := make(chan int, 1024)
	cb.Start(func(msg Message) {
		if c, ok := msg.(*Cancel); ok && c.Gen == 3 {
			got <- len(c.IDs)
		}
	})
	ca.Start(func(Message) {})
	m := &Master{cfg: MasterConfig{MaxFrame: DefaultMaxFrame}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	const n = 70000
	w := &mworker{name: "w", conn: ca, cancelsGen: 3}
	for i := range n {
		w.cancels = append(w.cancels, int32(i))
	}
	m.sendCancels(w)
	total := 0
	for total < n {
		select {
		case k := <-got:
			total += k
		case <-cb.Done():
			t.Fatalf("the worker's end closed after %d of %d ids: %v", total, n, cb.Err())
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d ids arrived", total, n)
		}
	}
	if total != n || len(w.cancels) != 0 {
		t.Errorf("%d ids arrived, %d left to send; want %d and 0", total, len(w.cancels), n)
	}
}
