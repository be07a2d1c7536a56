package es_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/esgrid/esgrid/es"
)

// A run's notes go into its checkpoints, come back on resume, and are
// kept by a resumed run that sets none; the resumed run is the
// uninterrupted one, bit for bit.
func TestCheckpointKeepsNotes(t *testing.T) {
	const k, total = 5, 12
	cfg := sphereConfig(total)
	want := record(t, newEngine(t, cfg), sphere, es.RunOptions{})

	path := filepath.Join(t.TempDir(), "run.ckpt")
	short := cfg
	short.Stop.Generations = k
	var notes []es.Note
	first := record(t, newEngine(t, short), sphere, es.RunOptions{Checkpoint: path, OnGeneration: func(s es.Stats) error {
		// Noted after the checkpoint of generation s.Gen: in the next one.
		notes = append(notes, es.Note{Kind: "excluded", Key: fmt.Sprintf("10.0.0.%d", s.Gen), Value: "it lied"})
		return nil
	}, Notes: func() []es.Note { return notes }})
	e, err := es.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Notes(); !slices.Equal(got, notes[:k]) {
		t.Fatalf("resumed with notes %v, want %v", got, notes[:k])
	}
	if err := e.SetStop(es.Stop{Generations: total}); err != nil {
		t.Fatal(err)
	}
	second := record(t, e, sphere, es.RunOptions{Checkpoint: path})
	requireSame(t, want, trajectory{stats: append(first.stats, second.stats...), parents: second.parents, best: second.best, reason: second.reason})
	final, err := es.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := final.Notes(); !slices.Equal(got, notes[:k]) {
		t.Errorf("the resumed run's last checkpoint has notes %v, want the resumed ones %v", got, notes[:k])
	}
}

// A checkpoint of format 3 (es/testdata/format3.ckpt, written before
// notes existed: sphere, μ 3, λ 5, dimension 2, seed 7, stopped after
// generation 3) still loads, without notes, and continues the run it
// saved bit for bit.
func TestCheckpointFormat3Loads(t *testing.T) {
	cfg := es.Config{Problem: "sphere", Mu: 3, Lambda: 5, Dim: 2, Lower: -5.12, Upper: 5.12, Seed: 7, Stop: es.Stop{Generations: 10}}
	want := record(t, newEngine(t, cfg), sphere, es.RunOptions{})
	data, err := os.ReadFile("testdata/format3.ckpt")
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.BigEndian.Uint32(data[8:]); v != 3 {
		t.Fatalf("testdata/format3.ckpt is of format %d", v)
	}
	e, err := es.LoadCheckpoint("testdata/format3.ckpt")
	if err != nil {
		t.Fatal(err)
	}
	if e.Gen() != 4 || e.Notes() != nil {
		t.Fatalf("resumed at generation %d with notes %v, want 4 and none", e.Gen(), e.Notes())
	}
	if err := e.SetStop(cfg.Stop); err != nil {
		t.Fatal(err)
	}
	got := record(t, e, sphere, es.RunOptions{})
	got.stats = append(slices.Clone(want.stats[:4]), got.stats...)
	requireSame(t, want, got)
}

// A generation whose evaluation fails after something was noted (a host
// excluded during it) leaves a checkpoint of the last completed
// generation with the new notes.
func TestRunKeepsNotesOfFailedGeneration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.ckpt")
	var notes []es.Note
	boom := errors.New("boom")
	ev := es.EvaluatorFunc(func(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
		if gen == 3 {
			notes = append(notes, es.Note{Kind: "excluded", Key: "10.0.0.9", Value: "it lied in generation 3"})
			return nil, boom
		}
		return sphere(ctx, gen, xs)
	})
	e := newEngine(t, sphereConfig(10))
	_, err := e.Run(t.Context(), ev, es.RunOptions{Checkpoint: path, Notes: func() []es.Note { return notes }})
	if !errors.Is(err, boom) {
		t.Fatalf("Run: %v, want boom", err)
	}
	back, err := es.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Gen() != 3 || !slices.Equal(back.Notes(), notes) {
		t.Fatalf("checkpoint at generation %d with notes %v, want 3 with %v", back.Gen(), back.Notes(), notes)
	}
}

// Notes are bounded: SetNotes refuses too many, too long or kindless
// ones, and so does loading a checkpoint that holds them (with its
// checksum right: hostile, not damaged), in one line, before allocating
// for a count it announces.
func TestCheckpointNotesBounds(t *testing.T) {
	e := newEngine(t, sphereConfig(1))
	record(t, e, sphere, es.RunOptions{})
	long := strings.Repeat("x", es.MaxNoteLen+1)
	many := make([]es.Note, es.MaxNotes+1)
	for i := range many {
		many[i] = es.Note{Kind: "excluded", Key: fmt.Sprint(i), Value: "why"}
	}
	for _, tt := range []struct {
		name  string
		notes []es.Note
		want  string
	}{
		{"too many", many, fmt.Sprintf("%d run notes, at most %d", es.MaxNotes+1, es.MaxNotes)},
		{"long key", []es.Note{{Kind: "excluded", Key: long, Value: "why"}}, "at most 1024"},
		{"long value", []es.Note{{Kind: "excluded", Key: "10.0.0.1", Value: long}}, "at most 1024"},
		{"long kind", []es.Note{{Kind: long}}, "at most 1024"},
		{"no kind", []es.Note{{Key: "10.0.0.1", Value: "why"}}, "no kind"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := e.SetNotes(tt.notes); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("SetNotes: %v, want an error saying %q", err, tt.want)
			}
			raw, err := msgpack.Marshal(tt.notes)
			if err != nil {
				t.Fatal(err)
			}
			refused(t, withNotes(t, e, raw), tt.want)
		})
	}
	// An array announcing 2³¹−1 notes, and nothing after it.
	refused(t, withNotes(t, e, []byte{0xdd, 0x7f, 0xff, 0xff, 0xff}), "2147483647 run notes, at most 4096")
	if e.Notes() != nil {
		t.Errorf("refused notes were kept: %v", e.Notes())
	}
	// At the bounds: accepted.
	most := make([]es.Note, es.MaxNotes)
	for i := range most {
		most[i] = es.Note{Kind: "k", Key: strings.Repeat("h", es.MaxNoteLen), Value: strings.Repeat("w", es.MaxNoteLen)}
	}
	if err := e.SetNotes(most); err != nil {
		t.Fatal(err)
	}
	data, err := e.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back es.Engine
	if err := back.UnmarshalBinary(data); err != nil || len(back.Notes()) != es.MaxNotes {
		t.Fatalf("notes at the bounds: %v, %d notes back", err, len(back.Notes()))
	}
}

// withNotes is e's checkpoint with its notes replaced by raw msgpack,
// sealed with a right checksum.
func withNotes(t *testing.T, e *es.Engine, raw []byte) []byte {
	t.Helper()
	good, err := e.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]msgpack.RawMessage
	if err := msgpack.Unmarshal(good[52:], &body); err != nil {
		t.Fatal(err)
	}
	body["notes"] = raw
	b, err := msgpack.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Clone(good[:20])
	binary.BigEndian.PutUint64(out[12:], uint64(len(b)))
	sum := sha256.Sum256(append(slices.Clone(out), b...))
	return append(append(out, sum[:]...), b...)
}

// refused checks that a checkpoint is refused, from memory and from a
// file, with one line saying want.
func refused(t *testing.T, data []byte, want string) {
	t.Helper()
	var d es.Engine
	err := d.UnmarshalBinary(data)
	var ce *es.CheckpointError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("UnmarshalBinary: %v, want a *CheckpointError, one line saying %q", err, want)
	}
	path := filepath.Join(t.TempDir(), "hostile.ckpt")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := es.LoadCheckpoint(path); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("LoadCheckpoint: %v, want an error saying %q", err, want)
	}
}

// More notes than a checkpoint keeps stop the run at the generation that
// made them, with an error that says so (the generation, that its
// checkpoint was not written) and that a program can tell from others
// (TooManyNotesError, to say what the notes were).
func TestRunSaysTooManyNotesStoppedIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.ckpt")
	var notes []es.Note
	ev := es.EvaluatorFunc(func(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
		if gen == 3 {
			for i := range es.MaxNotes + 1 {
				notes = append(notes, es.Note{Kind: "excluded", Key: fmt.Sprint(i), Value: "why"})
			}
		}
		return sphere(ctx, gen, xs)
	})
	e := newEngine(t, sphereConfig(10))
	_, err := e.Run(t.Context(), ev, es.RunOptions{Checkpoint: path, Notes: func() []es.Note { return notes }})
	var tm *es.TooManyNotesError
	if !errors.As(err, &tm) || tm.N != es.MaxNotes+1 {
		t.Fatalf("Run: %v, want a *TooManyNotesError of %d notes", err, es.MaxNotes+1)
	}
	const want = "es: generation 3: its checkpoint not written: 4097 run notes, at most 4096"
	if err.Error() != want {
		t.Errorf("Run: %q, want %q", err, want)
	}
	if back, err := es.LoadCheckpoint(path); err != nil || back.Gen() != 3 {
		t.Errorf("the checkpoint left: %v, want generation 2's (to resume at 3)", err)
	}
}
