package es

import (
	"context"
	"fmt"
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
			if serr := e.saveNotes(opts); serr != nil {
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
			if err := SaveCheckpoint(opts.Checkpoint, e); err != nil {
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
func (e *Engine) saveNotes(opts RunOptions) error {
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
	return SaveCheckpoint(opts.Checkpoint, e)
}

// EvaluatorFunc adapts a function to the Evaluator interface.
type EvaluatorFunc func(ctx context.Context, gen int, xs [][]float64) ([]float64, error)

// Evaluate calls f(ctx, gen, xs).
func (f EvaluatorFunc) Evaluate(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
	return f(ctx, gen, xs)
}
