package plugin

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/esgrid/esgrid/internal/logx"
)

// Bounds on what a plugin's standard error can cost the worker.
const (
	// maxLine is the longest stderr line logged; the rest of a longer
	// line is cut.
	maxLine = 1024
	// tailLines and tailBytes bound the stderr kept per process for error
	// messages (a process that dies says why there).
	tailLines = 8
	tailBytes = 2048
	// errLineBytes bounds the error line quoted before the tail.
	errLineBytes = 512
	// errLineKeep is how many lines after the error line are still its
	// trace (a Java or Rust backtrace runs to a few dozen); beyond them
	// the line is forgotten.
	errLineKeep = 100
)

// readStderr logs the process's stderr line by line, with the plugin's
// name and slot, until the pipe ends or is closed. Lines are cut at
// maxLine bytes and rate-limited per problem; the last few are kept for
// error messages whatever the rate.
func (p *Problem) readStderr(pr *proc) {
	defer close(pr.stderrDone)
	br := bufio.NewReaderSize(pr.stderr, maxLine)
	log := p.log.With("slot", pr.slot)
	for {
		line, err := br.ReadSlice('\n')
		text := strings.TrimRight(string(line), "\r\n")
		if errors.Is(err, bufio.ErrBufferFull) {
			text = cutUTF8(text) + " …(line cut)"
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
		}
		if len(line) > 0 {
			pr.tail.add(logx.Printable(text)) // the tail is quoted in errors
			if n, ok := p.stderrLimit.allow(time.Now()); ok {
				if n > 0 {
					log.Warn("plugin stderr: lines dropped (rate limit)", "dropped", n)
				}
				log.Info("plugin stderr", "line", text)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
				log.Debug("plugin stderr closed", "err", err)
			}
			return
		}
	}
}

// cutUTF8 drops a partial rune at the end of s.
func cutUTF8(s string) string {
	for range utf8.UTFMax - 1 {
		r, size := utf8.DecodeLastRuneInString(s)
		if len(s) == 0 || r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// tail keeps a process's last stderr lines, and the last line before
// them that names an error: a stack trace that prints its error first
// (Node.js, Java, Rust's panic with a backtrace) would push it out of the
// last lines, leaving only frames.
type tail struct {
	mu      sync.Mutex
	lines   []string
	errLine string // the last line pushed out that names an error
	errAge  int    // lines pushed out after errLine
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == tailLines {
		if namesError(t.lines[0]) {
			t.errLine, t.errAge = t.lines[0], 0
		} else if t.errLine != "" {
			// So long a trace after it is no trace of the end: an
			// error line from long before would mislead.
			if t.errAge++; t.errAge > errLineKeep {
				t.errLine = ""
			}
		}
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:tailLines-1]
	}
	t.lines = append(t.lines, line)
}

// namesError says whether a stderr line looks like the one that says
// what went wrong (ReferenceError: …, Exception in thread …, panicked
// at …, fatal error: …).
func namesError(line string) bool {
	l := strings.ToLower(line)
	for _, w := range []string{"error", "exception", "panic", "fatal"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// String is the kept lines joined by " | ", at most tailBytes from the
// end, after the error line pushed out if there is one, or "(nothing on
// stderr)".
func (t *tail) String() string {
	t.mu.Lock()
	s := strings.Join(t.lines, " | ")
	errLine := t.errLine
	t.mu.Unlock()
	if s == "" {
		return "(nothing on stderr)"
	}
	if len(s) > tailBytes {
		s = "…" + cutUTF8Start(s[len(s)-tailBytes:])
	}
	if errLine != "" {
		s = clip(errLine, errLineBytes) + " | … | " + s
	}
	return s
}

// cutUTF8Start drops a partial rune at the start of s.
func cutUTF8Start(s string) string {
	for i := 0; i < len(s) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return s
}

// limiter is a token bucket: rate lines a second, bursts of burst. It
// counts what it refused, to say so once lines are allowed again.
type limiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	tokens  float64
	last    time.Time
	dropped int
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// allow takes a token if there is one; n is the lines refused since the
// last allowed one.
func (l *limiter) allow(now time.Time) (n int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	if l.tokens < 1 {
		l.dropped++
		return 0, false
	}
	l.tokens--
	n, l.dropped = l.dropped, 0
	return n, true
}

// discardLogger drops everything.
var discardLogger = slog.New(slog.DiscardHandler)
