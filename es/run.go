package es

import (
	"context"
	"fmt"
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
				return "", fmt.Errorf("es: generation %d interrupted: %w", gen, cerr)
			}
			return "", fmt.Errorf("es: generation %d: %w", gen, err)
		}
		if err := e.Tell(fitness); err != nil {
			return "", err
		}
		if opts.Checkpoint != "" {
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

// EvaluatorFunc adapts a function to the Evaluator interface.
type EvaluatorFunc func(ctx context.Context, gen int, xs [][]float64) ([]float64, error)

// Evaluate calls f(ctx, gen, xs).
func (f EvaluatorFunc) Evaluate(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
	return f(ctx, gen, xs)
}
