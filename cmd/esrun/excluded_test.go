package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/es"
)

// noted rewrites the checkpoint at path with notes, as a run whose
// master excluded hosts would have written it.
func noted(t *testing.T, path string, notes ...es.Note) {
	t.Helper()
	e, err := es.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetNotes(notes); err != nil {
		t.Fatal(err)
	}
	if err := es.SaveCheckpoint(path, e); err != nil {
		t.Fatal(err)
	}
}

// A run resumed from a checkpoint that keeps an excluded host starts
// with it in force: its master says so once, keeps it in every
// checkpoint it writes, and the run is the uninterrupted one. A run
// resumed in process keeps it too, for a later one on a grid.
func TestResumeKeepsExclusions(t *testing.T) {
	dir := t.TempDir()
	ckpt, whole, resumed := filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "whole.json"), filepath.Join(dir, "resumed.json")
	common := []string{"-dim", "8", "-seed", "11", "-quiet"}
	if code, _, stderr := esrun(context.Background(), append(common, "-gens", "8", "-report", whole, "-inprocess")...); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := esrun(context.Background(), append(common, "-gens", "4", "-checkpoint", ckpt, "-inprocess")...); code != 0 {
		t.Fatal(stderr)
	}
	const why = "its fitness value 2 for task 1 of generation 3 differs from the value 1 that workers on other hosts agree on"
	excluded := es.Note{Kind: noteExcluded, Key: "127.0.0.9", Value: why}
	noted(t, ckpt, excluded)
	code, _, stderr := esrun(context.Background(), "-resume", ckpt, "-gens", "8", "-report", resumed, "-quiet", "-policy", "wq", "-local", "2")
	if code != 0 {
		t.Fatal(stderr)
	}
	if n := strings.Count(stderr, "host 127.0.0.9 stays excluded from this run: "+why); n != 1 {
		t.Errorf("the exclusion was said %d times, want once:\n%s", n, stderr)
	}
	w, r := readReport(t, whole), readReport(t, resumed)
	if r.Config.StartGen != 5 || *r.Best.F != *w.Best.F {
		t.Fatalf("resumed run: start %d, best %v; the whole run's best %v", r.Config.StartGen, *r.Best.F, *w.Best.F)
	}
	e, err := es.LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if e.Gen() != 9 || !slices.Equal(e.Notes(), []es.Note{excluded}) {
		t.Fatalf("the resumed run's checkpoint: generation %d, notes %v; want 9 and the exclusion", e.Gen(), e.Notes())
	}
	if code, _, stderr := esrun(context.Background(), "-resume", ckpt, "-gens", "10", "-quiet", "-inprocess"); code != 0 {
		t.Fatal(stderr)
	}
	if e, err = es.LoadCheckpoint(ckpt); err != nil || e.Gen() != 11 || !slices.Equal(e.Notes(), []es.Note{excluded}) {
		t.Fatalf("after a run in process: %v, generation %d, notes %v", err, e.Gen(), e.Notes())
	}
}

// A checkpoint whose notes esrun cannot take (a host that is not an IP
// address, a kind it does not know) is refused in one line naming it,
// before anything starts.
func TestResumeRefusesBadExclusions(t *testing.T) {
	for _, tt := range []struct {
		note es.Note
		want string
	}{
		{es.Note{Kind: noteExcluded, Key: "liar.example.com", Value: "it lied"}, `excluded host "liar.example.com": not an IP address`},
		{es.Note{Kind: noteExcluded, Key: "10.0.0.9"}, "excluded host 10.0.0.9: no reason given"},
		{es.Note{Kind: "future", Key: "k", Value: "v"}, `a run note of kind "future", which this esrun does not know`},
	} {
		t.Run(tt.want, func(t *testing.T) {
			ckpt := filepath.Join(t.TempDir(), "run.ckpt")
			if code, _, stderr := esrun(context.Background(), "-dim", "4", "-gens", "1", "-quiet", "-checkpoint", ckpt, "-inprocess"); code != 0 {
				t.Fatal(stderr)
			}
			noted(t, ckpt, tt.note)
			code, _, stderr := esrun(context.Background(), "-resume", ckpt, "-gens", "3", "-quiet", "-local", "1")
			if code != 1 || !strings.Contains(stderr, "checkpoint "+ckpt+": "+tt.want) || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "listening") {
				t.Errorf("exit %d, stderr:\n%s\nwant status 1 and one line saying %q", code, stderr, tt.want)
			}
		})
	}
}

// More hosts excluded than a checkpoint keeps stop the run with an
// error that says so, and what to do; other errors pass as they are.
func TestTooManyExcludedSaysWhatToDo(t *testing.T) {
	engineErr := fmt.Errorf("es: generation 7: its checkpoint not written: %w", &es.TooManyNotesError{N: es.MaxNotes + 1})
	err := tooManyExcluded(engineErr)
	for _, want := range []string{
		"es: generation 7: its checkpoint not written: 4097 run notes, at most 4096: ",
		"-verify has excluded 4097 hosts from the run, more than a checkpoint keeps for -resume (4096), so the run stops",
		"the same bits on every machine",
		"without -checkpoint",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if !errors.Is(err, engineErr) || strings.Contains(err.Error(), "\n") {
		t.Errorf("%q: want one line wrapping the engine's error", err)
	}
	other := errors.New("es: generation 7: boom")
	if got := tooManyExcluded(other); got != other {
		t.Errorf("another error became %q", got)
	}
	if tooManyExcluded(nil) != nil {
		t.Error("nil became an error")
	}
}
