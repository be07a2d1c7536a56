package logx

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

// A duration is seconds under an _s key in JSON, also inside a group and
// from With; a NaN or infinite float is null; the line stays one object.
func TestJSONDurationsAndNonFinite(t *testing.T) {
	var b bytes.Buffer
	log := New(&b, true, slog.LevelInfo).With("per", 2*time.Second)
	log.Info("m", "retry_in", 1500*time.Millisecond, "eta_s", 3*time.Second, "best", math.NaN(), "worst", math.Inf(1),
		slog.Group("g", "wait", 250*time.Millisecond), "n", 7, "role", role(2))
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatalf("%q: %v", b.String(), err)
	}
	want := map[string]any{"role": "master", "per_s": 2.0, "retry_in_s": 1.5, "eta_s": 3.0, "best": nil, "worst": nil, "n": 7.0}
	for k, v := range want {
		if got, ok := rec[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v; line %s", k, got, ok, v, b.String())
		}
	}
	if g, _ := rec["g"].(map[string]any); g["wait_s"] != 0.25 {
		t.Errorf("group g = %v, want wait_s 0.25", rec["g"])
	}
	for _, k := range []string{"per", "retry_in", "eta_s_s"} {
		if _, ok := rec[k]; ok {
			t.Errorf("key %s present: %s", k, b.String())
		}
	}
}

// Text keeps the key and writes the duration rounded, as Go writes one.
func TestTextDurations(t *testing.T) {
	var b bytes.Buffer
	New(&b, false, slog.LevelInfo).Info("m", "retry_in", 1234567891*time.Nanosecond, "rtt", 1234567*time.Nanosecond)
	if s := b.String(); !strings.Contains(s, " retry_in=1.235s ") || !strings.Contains(s, " rtt=1.23ms") {
		t.Errorf("text line %q", s)
	}
}

// Say writes the text as it is, or the record under JSON.
func TestConsoleSay(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		var b bytes.Buffer
		c := Console{W: &b, Log: New(&b, asJSON, slog.LevelInfo), JSON: asJSON}
		c.Say(slog.LevelInfo, "esrun: listening data=a gossip=b", "listening", "addr", "a", "gossip", "b")
		switch got := b.String(); {
		case !asJSON && got != "esrun: listening data=a gossip=b\n":
			t.Errorf("text %q", got)
		case asJSON:
			var rec map[string]any
			if err := json.Unmarshal([]byte(got), &rec); err != nil || rec["msg"] != "listening" || rec["addr"] != "a" {
				t.Errorf("json %q: %v", got, err)
			}
		}
	}
}

// Text from elsewhere (a plugin's error answer, a worker's) stays one
// line on the console: a newline, a carriage return or an escape sequence
// in it is written escaped, and cannot forge a line or repaint the
// terminal.
func TestConsoleSayOneLine(t *testing.T) {
	var b bytes.Buffer
	c := Console{W: &b}
	c.Say(slog.LevelError, "esrun: task 0: bad\n\x1b[31mesrun: done\x1b[0m\r\a\tü €", "the run failed")
	if got, want := b.String(), `esrun: task 0: bad\n\x1b[31mesrun: done\x1b[0m\r\a\tü €`+"\n"; got != want {
		t.Errorf("Say wrote %q, want %q", got, want)
	}
}

// role names itself, as grid.Role does.
type role uint8

func (r role) String() string { return [...]string{"?", "worker", "master"}[r] }

// Cut keeps text within its bound whole or cuts it on a rune boundary,
// marked: a multi-byte rune across the bound is left out, not split.
func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"}, // é is 2 bytes: bytes 1–2
		{"éé", 3, "é…"},
		{"é", 0, "…"},
	} {
		if got := Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
