package report

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// seconds writes a time in seconds with three or four significant digits.
func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= time.Second:
		d = d.Round(time.Millisecond)
	case d >= time.Millisecond:
		d = d.Round(10 * time.Microsecond)
	default:
		d = d.Round(time.Microsecond)
	}
	return d.String()
}

func share(part, whole float64) string {
	if whole <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*part/whole)
}

func fitness(f *float64) string {
	if f == nil {
		return "NaN"
	}
	return fmt.Sprintf("%.6e", *f)
}

// utilisation is the share of a worker's slot-time while present that it
// executed.
func utilisation(busy float64, slots int, present float64) float64 {
	if slots <= 0 || present <= 0 {
		return 0
	}
	return busy / (float64(slots) * present)
}

// Summary is the report in a few lines and a table of the workers.
func Summary(rep *Report) string {
	var b strings.Builder
	c := rep.Config
	last := -1
	if n := len(rep.Generations); n > 0 {
		last = rep.Generations[n-1].Gen
	}
	fmt.Fprintf(&b, "run: %s on %s, %d-D, μ %d, λ %d, seed %d; %d generations to %d, %d evaluations, stop: %s, %s\n",
		c.Strategy, c.Problem, c.Dim, c.Mu, c.Lambda, c.Seed, len(rep.Generations), last, rep.Evals, orNone(rep.Stop), seconds(rep.WallSeconds))
	fmt.Fprintf(&b, "best fitness: %s\n", fitness(rep.Best.F))
	s := rep.Schedule
	if s == nil {
		b.WriteString("evaluated in process: no schedule\n")
		return b.String()
	}
	fmt.Fprintf(&b, "schedule %s on %d workers: total %s = compute %s (%s) + sync wait %s (%s) + comm %s (%s)\n",
		s.Policy, s.Workers, seconds(s.Total), seconds(s.Compute), share(s.Compute, s.Total),
		seconds(s.SyncWait), share(s.SyncWait, s.Total), seconds(s.Comm), share(s.Comm, s.Total))
	fmt.Fprintf(&b, "the paper's comm (every moment a worker slot did not execute): %s (%s)\n", seconds(s.CommPaper), share(s.CommPaper, s.Total))
	fmt.Fprintf(&b, "between generations (outside total): %s; a slot executed %s of total (busy %s, averaged over the workers present)\n",
		seconds(s.Between), share(s.Busy, s.Total), seconds(s.Busy))
	fmt.Fprintf(&b, "efficiency: %s of LB %s, %s of the barrier bound %s (round trip %s)\n",
		share(s.EfficiencyLB, 1), seconds(s.LB), share(s.EfficiencyBarrier, 1), seconds(s.BarrierBound), seconds(s.RoundTrip))
	fmt.Fprintf(&b, "tasks: %d originals, %d resends, %d replicas; cancels %d held, %d running, %d late (%s wasted); %d duplicate and %d stale results\n",
		s.Originals, s.Resends, s.Replicas, s.CancelsHeld, s.CancelsRunning, s.CancelsLate, seconds(s.Wasted), s.Duplicates, s.Stale)
	if len(s.PerWorker) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "worker\tslots\tpresent\tbusy/present\tcomm\tcomm (paper)\taccepted\tmean exec\tround trip\t")
		for _, w := range s.PerWorker {
			name := w.Name
			if name == "" {
				name = fmt.Sprint(w.Worker)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f%%\t%s\t%s\t%d\t%s\t%s\t\n", name, w.Slots, seconds(w.Present),
				100*utilisation(w.Busy, w.Slots, w.Present), seconds(w.Comm), seconds(w.CommPaper), w.Accepted, seconds(w.MeanExec), seconds(w.RoundTrip))
		}
		tw.Flush()
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none (failed or interrupted)"
	}
	return s
}
