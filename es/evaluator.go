package es

import "context"

// Evaluator computes the fitness of a batch of candidate vectors. It is the
// seam between the engine and whatever evaluates: an in-process pool, or a
// grid master that schedules the batch over remote workers.
//
// gen is the generation the batch belongs to (0 for the initial parents) and
// xs[i] is task i of that batch. The result must have len(xs) values, where
// the value at i is f(xs[i]); the order in which tasks are evaluated must not
// matter. An Evaluator must not modify xs.
//
// A failed evaluation is returned as an error that names the task, e.g.
// "task 17: ..."; Run adds the generation. When ctx is cancelled, Evaluate
// should return promptly with an error; the batch is then asked again, and
// evaluated afresh, when the run continues.
type Evaluator interface {
	Evaluate(ctx context.Context, gen int, xs [][]float64) ([]float64, error)
}
