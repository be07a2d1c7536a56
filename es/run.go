package es

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
)

// RunOptions are the optional parts of Run. The zero value runs without
// callbacks or checkpoints.
type RunOptions struct {
	// OnGeneration, if set, is called after every completed generation
	// (after the checkpoint is written). A non-nil error stops the run and
	// is returned wrapped.
	OnGeneration func(Stats) error
	// Checkpoint, if not empty, is the file the engine's state is written
	// to after every generation (see SaveCheckpoint).
	Checkpoint string
	// Notes, if set, is called before each checkpoint is written, and
	// what it returns becomes the engine's notes (SetNotes), stored with
	// the state: what the program driving the run keeps across a restart.
	// When the evaluation of a generation fails and the notes have
	// changed since the last checkpoint, Run writes it again, with the
	// same state (the last completed generation) and the new notes: what
	// was noted during the failed generation (a host excluded) is kept.
	// Default nil: the engine's notes (a resumed run's) are kept as they
	// are.
	Notes func() []Note
}

// Run drives the engine until a stopping criterion holds: Ask, evaluate the
// batch with ev, Tell, checkpoint, report. It returns why it stopped.
//
// If ctx is cancelled, or ev fails, Run returns an error naming the
// generation (and wrapping ctx.Err() or ev's error, which should name the
// task) and the engine stays at the last completed generation: calling Run
// again, or resuming from the checkpoint, redoes the interrupted generation
// exactly.
func (e *Engine) Run(ctx context.Context, ev Evaluator, opts RunOptions) (StopReason, error) {
	ckpt := &checkpointFile{path: opts.Checkpoint}
	for {
		if r := e.Done(); r != "" {
			return r, nil
		}
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("es: interrupted before generation %d: %w", e.gen, err)
		}
		gen, xs := e.Ask()
		fitness, err := ev.Evaluate(ctx, gen, xs)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				err = fmt.Errorf("es: generation %d interrupted: %w", gen, cerr)
			} else {
				err = fmt.Errorf("es: generation %d: %w", gen, err)
			}
			if serr := e.saveNotes(opts, ckpt); serr != nil {
				err = fmt.Errorf("%w; and what was noted during it could not be saved: %w", err, serr)
			}
			return "", err
		}
		if err := e.Tell(fitness); err != nil {
			return "", err
		}
		if opts.Checkpoint != "" {
			if opts.Notes != nil {
				notes := opts.Notes()
				if err := checkNotes(notes); err != nil {
					// The last checkpoint written stays: a resumed run
					// redoes this generation.
					return "", fmt.Errorf("es: generation %d: its checkpoint not written: %w", gen, err)
				}
				e.notes = slices.Clone(notes)
			}
			if err := ckpt.save(e); err != nil {
				return "", err
			}
		}
		if opts.OnGeneration != nil {
			if err := opts.OnGeneration(e.last); err != nil {
				return "", fmt.Errorf("es: generation %d: %w", gen, err)
			}
		}
	}
}

// saveNotes writes the checkpoint again if the notes changed since it
// was written, once a generation's evaluation has failed: the engine is
// still at the last completed generation, only the notes are new.
func (e *Engine) saveNotes(opts RunOptions, ckpt *checkpointFile) error {
	if opts.Checkpoint == "" || opts.Notes == nil || e.parents == nil {
		return nil
	}
	notes := opts.Notes()
	if slices.Equal(notes, e.notes) {
		return nil
	}
	if err := e.SetNotes(notes); err != nil {
		return err
	}
	return ckpt.save(e)
}

// checkpointFile is a run's checkpoint file and the file it last wrote
// there. Each checkpoint is a new file renamed over the old one, so a file
// at the path that is not the one written last was put there by another
// process: a second run writing the same checkpoint (two esrun given the
// same -checkpoint with -force, or the same -resume). The two used to
// replace each other's checkpoint generation after generation, and either
// could be resumed from what the other wrote; now the run that finds the
// other's file stops, and the file stays the other's.
type checkpointFile struct {
	path    string
	written os.FileInfo
	gen     int // the last completed generation when written
}

// ErrCheckpointReplaced is in the chain of the error of a run that found
// its checkpoint file replaced by another process: the file is no longer
// this run's to continue.
var ErrCheckpointReplaced = errors.New("replaced by another process")

// save writes e's state, unless another process replaced the last one.
func (c *checkpointFile) save(e *Engine) error {
	if c.written != nil {
		if now, err := os.Stat(c.path); err == nil && !os.SameFile(c.written, now) {
			return fmt.Errorf("es: checkpoint %s: %w since this run wrote it after generation %d: two runs write this file; let one of them write another (this one stops)", c.path, ErrCheckpointReplaced, c.gen)
		}
	}
	if err := SaveCheckpoint(c.path, e); err != nil {
		return err
	}
	c.written, _ = os.Stat(c.path) // nil if it cannot be read back: no check next time
	c.gen = e.last.Gen
	return nil
}

// EvaluatorFunc adapts a function to the Evaluator interface.
type EvaluatorFunc func(ctx context.Context, gen int, xs [][]float64) ([]float64, error)

// Evaluate calls f(ctx, gen, xs).
func (f EvaluatorFunc) Evaluate(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
	return f(ctx, gen, xs)
}
