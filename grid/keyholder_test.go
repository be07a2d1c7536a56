package grid

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A key holder that connects under the name of a worker connected from
// another host does not take its place: the honest connection stays,
// and the impostor is refused with the reason. (The master dropped the
// honest worker as "reconnected", and a key holder that kept reconnecting
// under each worker's name kept every honest worker out.) A worker that
// reconnects from its own host still replaces its old connection.
func TestMasterNameTakenFromAnotherHost(t *testing.T) {
	t.Run("another host is refused", func(t *testing.T) {
		m := startMaster(t, "wq")
		honest := newTestWorker("lab-1", 1, 0)
		honest.from = "127.0.0.3"
		startWorkers(t, m, honest)
		thief := newTestWorker("lab-1", 64, 0)
		thief.from = "127.0.0.4"
		thief.freeze = true
		if err := thief.start(t, m.Addr(), m.cfg.Key); err != nil {
			t.Fatalf("the impostor's handshake: %v", err)
		}
		select {
		case <-thief.conn.Done():
		case <-honest.conn.Done():
			t.Fatalf("the honest worker's connection closed: %v", honest.conn.Err())
		case <-time.After(time.Minute):
			t.Fatal("neither connection closed")
		}
		var rej *RejectError
		if err := thief.conn.Err(); !errors.As(err, &rej) || !strings.Contains(rej.Reason, `"lab-1"`) {
			t.Errorf("the impostor's connection ended with %v, want a Reject naming the name", err)
		}
		evalAndCheck(t, m, 2, 10)
		if err := honest.conn.Err(); err != nil {
			t.Errorf("the honest worker's connection: %v", err)
		}
		if st := m.Stats(); st.Lost.Reconnected != 0 || st.Workers != 1 {
			t.Errorf("reconnected %d, workers %d; want 0 and 1", st.Lost.Reconnected, st.Workers)
		}
	})
	t.Run("its own host replaces", func(t *testing.T) {
		m := startMaster(t, "wq")
		old := newTestWorker("lab-1", 1, 0)
		old.from = "127.0.0.3"
		startWorkers(t, m, old)
		again := newTestWorker("lab-1", 1, 0)
		again.from = "127.0.0.3"
		if err := again.start(t, m.Addr(), m.cfg.Key); err != nil {
			t.Fatal(err)
		}
		select {
		case <-old.conn.Done():
		case <-time.After(time.Minute):
			t.Fatal("the old connection was not dropped")
		}
		evalAndCheck(t, m, 1, 10)
		if st := m.Stats(); st.Lost.Reconnected != 1 {
			t.Errorf("reconnected %d, want 1", st.Lost.Reconnected)
		}
	})
}

