package logx

import (
	"strings"
	"sync"
	"testing"
)

// tornWriter fails the test when two writes overlap.
type tornWriter struct {
	t      *testing.T
	mu     sync.Mutex
	in     bool
	lines  strings.Builder
	writes int
}

func (w *tornWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.in {
		w.t.Error("two writes at once")
	}
	w.in = true
	w.mu.Unlock()
	w.lines.Write(p) // unguarded: a race if SyncWriter let two in
	w.mu.Lock()
	w.in, w.writes = false, w.writes+1
	w.mu.Unlock()
	return len(p), nil
}

// Writes from many goroutines reach the writer one at a time, whole.
func TestSyncWriter(t *testing.T) {
	tw := &tornWriter{t: t}
	s := &SyncWriter{W: tw}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				s.Write([]byte("line\n"))
			}
		})
	}
	wg.Wait()
	if tw.writes != 800 || tw.lines.String() != strings.Repeat("line\n", 800) {
		t.Errorf("%d writes", tw.writes)
	}
}
