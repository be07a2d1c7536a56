package grid

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// LimitLog returns a logger that passes on at most burst records at once
// and rate a second on average, and says how many it suppressed on the
// next record it lets through (suppressed_since_last): one line per
// refused connection, or per odd frame from a peer that holds the key,
// without letting a flood of them (a port scan, a worker with the wrong
// key retrying, a hostile master) flood the log.
func LimitLog(log *slog.Logger, rate float64, burst int) *slog.Logger {
	return slog.New(&limitedHandler{Handler: log.Handler(), lim: &rateLimit{rate: rate, burst: float64(burst), tokens: float64(burst)}})
}

type rateLimit struct {
	mu         sync.Mutex
	rate       float64
	burst      float64
	tokens     float64
	last       time.Time
	suppressed int
}

// take reports whether a record may pass, and how many were suppressed
// since the last that did.
func (r *rateLimit) take() (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.last.IsZero() {
		r.tokens = min(r.burst, r.tokens+now.Sub(r.last).Seconds()*r.rate)
	}
	r.last = now
	if r.tokens < 1 {
		r.suppressed++
		return false, 0
	}
	r.tokens--
	n := r.suppressed
	r.suppressed = 0
	return true, n
}

type limitedHandler struct {
	slog.Handler
	lim *rateLimit
}

func (h *limitedHandler) Handle(ctx context.Context, rec slog.Record) error {
	ok, suppressed := h.lim.take()
	if !ok {
		return nil
	}
	if suppressed > 0 {
		rec.AddAttrs(slog.Int("suppressed_since_last", suppressed))
	}
	return h.Handler.Handle(ctx, rec)
}

func (h *limitedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &limitedHandler{Handler: h.Handler.WithAttrs(as), lim: h.lim}
}

func (h *limitedHandler) WithGroup(name string) slog.Handler {
	return &limitedHandler{Handler: h.Handler.WithGroup(name), lim: h.lim}
}
