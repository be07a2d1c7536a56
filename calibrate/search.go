package calibrate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/atomicfile"
	"github.com/esgrid/esgrid/sched/plan"
)

// Request asks Search for the best configurations of a calibration's
// machines (esplan plan's flags).
type Request struct {
	// N is the tasks' LU load size; or, when TaskMS > 0, the size at
	// which one machine of group Ref (default the fastest) alone with
	// one slot takes TaskMS milliseconds a task.
	N      int
	TaskMS float64
	Ref    string
	Tasks  int          // tasks per batch (the ES's λ)
	Policy string       // the run's policy: rr, r3q and eft replicate
	Slots  []int        // slot counts to consider, sorted (nil: every M measured)
	Top    int          // configurations to keep
	Fit    plan.Options // the models' fit
	// Models prints the fitted models first.
	Models bool
}

// Search fits cal's models, searches its configurations for req and
// prints them on w (the models too with req.Models, and the size that
// req.TaskMS stands for); it returns the best as a plan file.
func Search(w io.Writer, cal *plan.Calibration, req Request) (*grid.Plan, error) {
	ms, err := plan.Fit(cal, req.Fit)
	if err != nil {
		return nil, err
	}
	if req.Models {
		PrintModels(w, cal, ms)
		fmt.Fprintln(w)
	}
	size := float64(req.N)
	if req.TaskMS > 0 {
		g, s, err := SizeForTime(ms, cal, req.Ref, req.TaskMS/1000)
		if err != nil {
			return nil, err
		}
		size = math.Round(s)
		fmt.Fprintf(w, "tasks of %g ms on group %s alone with 1 slot: N = %.0f\n", req.TaskMS, g, size)
	}
	replicate := req.Policy == "rr" || req.Policy == "r3q" || req.Policy == "eft"
	groups := cal.Groups()
	res, err := plan.Search(ms, plan.Request{N: size, Tasks: req.Tasks, Groups: groups, Slots: req.Slots, Replicate: replicate, Top: req.Top})
	if err != nil {
		return nil, err
	}
	PrintPlan(w, size, req.Tasks, req.Policy, groups, res)
	return PlanFile(cal, groups, size, req.Tasks, res), nil
}

// WriteJSON writes v as indented JSON to path through a temporary file
// and a rename, so a reader never sees half a file; "-" is stdout.
func WriteJSON(path string, v any, stdout io.Writer) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err := stdout.Write(b)
		return err
	}
	return atomicfile.WriteBytes(path, 0o644, b)
}
