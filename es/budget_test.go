package es

import "testing"

// The default budget is 10⁴ evaluations a dimension, and never less than
// generation 0's batch.
func TestDefaultBudget(t *testing.T) {
	if got := DefaultBudget(30, 15, 100); got != 300_000 {
		t.Errorf("n=30: %d", got)
	}
	if got := DefaultBudget(1, 20_000, 100); got != 20_000 {
		t.Errorf("μ above the budget: %d", got)
	}
	if got := DefaultBudget(1, 15, 50_000); got != 50_000 {
		t.Errorf("λ above the budget: %d", got)
	}
}
