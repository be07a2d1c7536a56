package plugin

import (
	"sync"
	"time"
)

// DefaultStartTimeout is the default Config.StartTimeout: how long a new
// process has to say hello. It is generous, since some plugins load a
// runtime or a model before they can answer.
const DefaultStartTimeout = 30 * time.Second

// Starts is the start history of one plugin, shared by every Problem
// opened with it (Config.Starts), so that the back-off after failed
// starts survives the Problem: a worker opens its plugin anew for each
// session with a master, and a plugin that fails at every start must not
// be restarted at every session. Only a started process that then
// answers an evaluation ends a run of failures; a start alone does not
// (it proves little when the next one fails again). It also limits the
// plugin's crash lines across its Problems (logCrash). The zero value is
// ready to use; it is safe for concurrent use.
type Starts struct {
	mu      sync.Mutex
	fails   int              // failed starts since a process last answered
	retryAt time.Time        // no start before this
	lastErr error            // the last failed start's error
	summary time.Time        // when the run of failures was last logged
	crashes *limiter         // the crash and kill lines (logCrash); made on first use
	now     func() time.Time // the clock; nil: time.Now (tests set it)
}

// Crash and kill lines are limited per plugin to crashBurst at once and
// one per crashEvery on average after that.
const (
	crashBurst = 5
	crashEvery = 10 * time.Second
)

// crashLine reports whether a crash or kill line may be logged now, and
// how many were held back since the last one that was.
func (st *Starts) crashLine() (held int, ok bool) {
	st.mu.Lock()
	if st.crashes == nil {
		st.crashes = newLimiter(1/crashEvery.Seconds(), crashBurst)
	}
	lim := st.crashes
	st.mu.Unlock()
	return lim.allow(st.clock())
}

func (st *Starts) clock() time.Time {
	if st.now != nil {
		return st.now()
	}
	return time.Now()
}

// wait reports how much longer starts back off, with the failures so
// far and the last one's error; 0 when a start may go ahead.
func (st *Starts) wait() (time.Duration, int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.fails == 0 {
		return 0, 0, nil
	}
	return max(st.retryAt.Sub(st.clock()), 0), st.fails, st.lastErr
}

// failed records a failed start and returns the failures in a row, the
// wait before the next start (RetryMin doubled per failure, at most
// RetryMax) and whether to log it: the first failure of a run, then a
// summary at most once a minute.
func (st *Starts) failed(err error, cfg *Config) (fails int, wait time.Duration, logIt bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.fails++
	wait = cfg.RetryMin << min(st.fails-1, 20)
	if wait <= 0 || wait > cfg.RetryMax {
		wait = cfg.RetryMax
	}
	now := st.clock()
	st.retryAt = now.Add(wait)
	st.lastErr = err
	logIt = st.fails == 1 || now.Sub(st.summary) >= time.Minute
	if logIt {
		st.summary = now
	}
	return st.fails, wait, logIt
}

// worked records that a process answered an evaluation: the run of
// failures, if any, is over. It returns how many there were.
func (st *Starts) worked() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := st.fails
	st.fails, st.retryAt, st.lastErr = 0, time.Time{}, nil
	return n
}
