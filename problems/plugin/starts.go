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
// (it proves little when the next one fails again). The zero value is
// ready to use; it is safe for concurrent use.
type Starts struct {
	mu      sync.Mutex
	fails   int              // failed starts since a process last answered
	retryAt time.Time        // no start before this
	lastErr error            // the last failed start's error
	summary time.Time        // when the run of failures was last logged
	now     func() time.Time // the clock; nil: time.Now (tests set it)
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
