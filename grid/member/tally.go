package member

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// DefaultTallyInterval is how often a Tally writes at most one line.
const DefaultTallyInterval = 10 * time.Second

// maxDetail bounds the example a Tally line quotes.
const maxDetail = 200

// Tally counts events that anyone on the network can cause (refused
// connections, junk datagrams, failed handshakes) and logs them as a
// summary: at most one line per interval, however many arrive. The first
// event after a quiet interval is logged at once (an operator who starts
// a worker with the wrong key sees why without waiting); the rest of the
// interval's are counted and written in one line when it ends, with the
// counts per kind and the last event's detail as an example. Kinds must
// come from a small fixed set chosen by the caller, never from the peer.
type Tally struct {
	log   *slog.Logger
	msg   string
	level slog.Level
	every time.Duration

	mu     sync.Mutex
	counts map[string]int64 // since the last line
	totals map[string]int64 // ever
	detail string           // the last event's, since the last line
	next   time.Time        // no line before this
	timer  *time.Timer      // armed while counts wait for their line
	closed bool
	lines  int64
}

// NewTally returns a tally that logs msg at level, at most once per every
// (DefaultTallyInterval when every <= 0).
func NewTally(log *slog.Logger, level slog.Level, msg string, every time.Duration) *Tally {
	if every <= 0 {
		every = DefaultTallyInterval
	}
	if log == nil {
		log = slog.Default()
	}
	return &Tally{log: log, msg: msg, level: level, every: every,
		counts: map[string]int64{}, totals: map[string]int64{}}
}

// Add counts one event of kind; detail (truncated) may be quoted as an
// example. It never blocks on I/O for long: at most one line is written,
// and only once per interval.
func (t *Tally) Add(kind, detail string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.totals[kind]++
	if t.closed {
		return
	}
	t.counts[kind]++
	t.detail = detail
	now := time.Now()
	if !now.Before(t.next) {
		t.writeLocked(now)
		return
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(t.next.Sub(now), t.flush)
	}
}

// flush writes what was counted since the last line.
func (t *Tally) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timer = nil
	if t.closed || len(t.counts) == 0 {
		return
	}
	t.writeLocked(time.Now())
}

func (t *Tally) writeLocked(now time.Time) {
	kinds := make([]string, 0, len(t.counts))
	var n int64
	for k, c := range t.counts {
		kinds = append(kinds, k)
		n += c
	}
	slices.Sort(kinds)
	args := make([]any, 0, 2*len(kinds)+6)
	args = append(args, "count", n)
	for _, k := range kinds {
		args = append(args, k, t.counts[k])
	}
	args = append(args, "example", clip(t.detail, maxDetail), "per", t.every)
	t.log.Log(context.Background(), t.level, t.msg, args...)
	clear(t.counts)
	t.detail = ""
	t.next = now.Add(t.every)
	t.lines++
}

// Close writes what is still counted and stops: later events are only
// counted in the totals.
func (t *Tally) Close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if len(t.counts) > 0 {
		t.writeLocked(time.Now())
	}
	t.closed = true
}

// Totals returns the count of every kind so far.
func (t *Tally) Totals() map[string]int64 {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.totals))
	for k, v := range t.totals {
		out[k] = v
	}
	return out
}

// Total is the number of events so far, of every kind.
func (t *Tally) Total() int64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, v := range t.totals {
		n += v
	}
	return n
}

// Lines is the number of lines written so far.
func (t *Tally) Lines() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lines
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
