// Package logx is the log format of the commands (esrun, esworker): one
// place that decides how a record is written, so that the master and the
// workers write the same thing the same way.
//
// Text (the default) is log/slog's key=value lines with durations rounded
// to three or four significant digits (1.25s, 310ms). JSON (-log-json) is
// one object per line, for machines: a duration is a number of seconds
// whose key ends in _s ("retry_in": 1.5s is written "retry_in_s": 1.5), and
// a fitness that is NaN or infinite is null, as in esrun's report, and a
// value with a name (a role, a message type) is its name, as in text. The
// vocabulary of keys is in docs/logs.md, section "Vocabulary".
package logx

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// New returns a logger writing to w at level: JSON lines when json is
// set, text lines otherwise.
func New(w io.Writer, json bool, level slog.Leveler) *slog.Logger {
	if json {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: jsonAttr}))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: textAttr}))
}

// SecondsSuffix ends the key of every duration in JSON.
const SecondsSuffix = "_s"

// jsonAttr writes durations as seconds under a key ending in _s,
// non-finite floats as null (encoding/json has no NaN), and a value that
// names itself (a fmt.Stringer: a role, a message type) by its name, as
// text does, rather than by its number.
func jsonAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error, json.Marshaler, encoding.TextMarshaler:
		case fmt.Stringer:
			return slog.String(a.Key, v.String())
		}
	case slog.KindDuration:
		key := a.Key
		if !strings.HasSuffix(key, SecondsSuffix) {
			key += SecondsSuffix
		}
		return slog.Float64(key, a.Value.Duration().Seconds())
	case slog.KindFloat64:
		if f := a.Value.Float64(); math.IsNaN(f) || math.IsInf(f, 0) {
			return slog.Any(a.Key, nil)
		}
	}
	return a
}

// textAttr rounds durations so that a person reads them at a glance.
func textAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Duration(a.Key, Round(a.Value.Duration()))
	}
	return a
}

// Round keeps three or four significant digits of d.
func Round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// Console is how a command speaks to the person who runs it on stderr:
// a plain line ("esrun: listening data=…") in text, which scripts and
// the documentation quote, and under -log-json a record of the log with the same
// facts as fields, so that every line on stderr is JSON.
type Console struct {
	W    io.Writer    // stderr
	Log  *slog.Logger // the command's logger (New)
	JSON bool         // -log-json
}

// Say writes text as one line (Printable), or under JSON the record msg
// with args at level.
func (c Console) Say(level slog.Level, text, msg string, args ...any) {
	if c.JSON {
		c.Log.Log(context.Background(), level, msg, args...)
		return
	}
	fmt.Fprintln(c.W, Printable(text))
}

// Printable escapes what a terminal would act on, as Go quotes it:
// control characters (a newline, a carriage return, an escape sequence)
// become \n, \r, \x1b, so that text from elsewhere (a plugin's error, a
// worker's) stays one line of text and cannot rewrite the screen.
// Printable text is returned as it is.
func Printable(s string) string {
	if !strings.ContainsFunc(s, notGraphic) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if notGraphic(r) {
			q := strconv.QuoteRuneToGraphic(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func notGraphic(r rune) bool { return r != ' ' && !unicode.IsGraphic(r) }

// MaxErrText bounds an error's text from elsewhere (a worker's, a
// plugin's) where it is kept: in the master's failures of a task, an
// in-process run's, and a report's failed_task, which must agree.
const MaxErrText = 300

// Cut cuts s to at most n bytes, on a rune boundary, marking a cut with
// "…": the bound on text from elsewhere (a worker's error, a plugin's)
// that goes into a log line or an error.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
