package logx

import (
	"io"
	"sync"
)

// SyncWriter serialises the writes to W, so that a command's lines and
// the logs of its goroutines (a grid's) never interleave within a line,
// whatever W is.
type SyncWriter struct {
	mu sync.Mutex
	W  io.Writer
}

// Write writes p to W, one Write at a time.
func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(p)
}
