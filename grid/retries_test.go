package grid

import (
	"fmt"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/internal/logx"
)

// TestRetriesExhaustedTextIsBounded: with -max-retries 1000 and one worker
// failing every try, the error named each failure, 1,001 copies of one
// text on one line. Its text now names each distinct failure once, with
// its count, and at most maxFailuresShown of them; the fields keep all.
func TestRetriesExhaustedTextIsBounded(t *testing.T) {
	e := &RetriesExhaustedError{Gen: 2, Task: 4, MaxRetries: 1000}
	for range 1001 {
		e.Failures = append(e.Failures, TaskFailure{Worker: "nan", Err: "non-finite fitness NaN"})
	}
	got := e.Error()
	want := "grid: generation 2, task 4 failed 1001 times (max retries 1000): nan: non-finite fitness NaN (1001 times)"
	if got != want {
		t.Errorf("error text %q (%d bytes)\nwant %q", logx.Cut(got, 300), len(got), want)
	}

	e = &RetriesExhaustedError{Gen: 0, Task: 1, MaxRetries: 30}
	for i := range 31 {
		e.Failures = append(e.Failures, TaskFailure{Worker: fmt.Sprintf("w%d", i%20), Err: "exit status 3"})
	}
	got = e.Error()
	for i := range maxFailuresShown {
		name := fmt.Sprintf("w%d: exit status 3", i)
		if i < 11 {
			name += " (2 times)" // w0–w10 failed twice (31 tries over 20 workers)
		}
		if !strings.Contains(got, name+";") {
			t.Errorf("error text %q does not name %q", got, name)
		}
	}
	if strings.Contains(got, fmt.Sprintf("w%d:", maxFailuresShown)) {
		t.Errorf("error text %q names more than %d distinct failures", got, maxFailuresShown)
	}
	if want := fmt.Sprintf("and %d other distinct failures", 20-maxFailuresShown); !strings.Contains(got, want) {
		t.Errorf("error text %q does not say %q", got, want)
	}
	if len(e.Failures) != 31 {
		t.Errorf("%d failures kept, want all 31", len(e.Failures))
	}
}
