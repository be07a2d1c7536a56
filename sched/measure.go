package sched

import "time"

// MeasureGain is the weight of a new measurement in a smoothed mean of a
// worker's round trip or execution time, the policies' and the drivers'
// alike: a slowdown shows within a few tasks, one outlier moves the mean
// by an eighth.
const MeasureGain = 1.0 / 8

// Smooth folds measurement x into mean (ns): the first measurement sets
// it, each later one moves it by MeasureGain of the difference; x ≤ 0
// (not measured) leaves it.
func Smooth(mean *float64, x time.Duration) {
	switch {
	case x <= 0:
	case *mean == 0:
		*mean = float64(x)
	default:
		*mean += (float64(x) - *mean) * MeasureGain
	}
}

// Deadlines is the drivers' rule for when a running instance is overdue
// (the event Overdue): one rule for the real master (grid.MasterConfig)
// and the simulator.
type Deadlines struct {
	// Factor: an instance is overdue after Factor × its worker's smoothed
	// execution time (the grid's while the worker has none) plus the
	// worker's smoothed round trip. Default 4; negative: no deadlines.
	Factor float64
	// Floor: never sooner. Default 1 s.
	Floor time.Duration
	// First: the deadline while no execution has been measured anywhere
	// (a silent worker may have taken the whole first batch). Default
	// 30 × Floor.
	First time.Duration
	// Ceiling caps Again: a task's deadline doubles at each overrun up to
	// it, never beyond (0 or less: up to 2^10 × the base, and no more).
	// The master sets half its task timeout, so that a task that hangs
	// now and then costs at most that a hang, not the task timeout's drop
	// of its worker. An instance of a task cut short at the ceiling
	// already gets no deadline (see Again): the task timeout decides
	// whether it is long or hung.
	Ceiling time.Duration
}

// WithDefaults returns d with its zero fields set to their defaults.
func (d Deadlines) WithDefaults() Deadlines {
	if d.Factor == 0 {
		d.Factor = 4
	}
	if d.Floor <= 0 {
		d.Floor = time.Second
	}
	if d.First <= 0 {
		d.First = 30 * d.Floor
	}
	return d
}

// Of is how long an instance may run on a worker whose smoothed execution
// time and round trip are exec and rtt (ns; 0: not measured yet) before it
// is overdue, gridExec being the grid's smoothed execution time; 0 when
// there are no deadlines (Factor < 0). d is taken with its defaults set.
func (d Deadlines) Of(exec, gridExec, rtt float64) time.Duration {
	if d.Factor < 0 {
		return 0
	}
	if exec == 0 {
		exec = gridExec
	}
	if exec == 0 {
		return d.First
	}
	return max(time.Duration(d.Factor*exec+rtt), d.Floor)
}

// OfWorker is Of for a worker whose instances were cut short as overdue,
// the longest after running for overran (0: none; see Overran), while it had finished
// none (exec 0) and others had. Its deadline then comes from the grid's
// mean or the floor, which say nothing of it, and such a run says its
// execution time is at least overran: so that counts as its execution
// time where the grid's says less. A worker whose tasks take longer than
// the floor gets a deadline Factor times longer at each overrun (up to
// Ceiling) and finishes a task within log_Factor(task time / Floor) + 1
// overruns, instead of being cut short at the floor in every generation
// and never measured. A worker measured already keeps Factor times its
// own mean (a stall of one known to be fast is cut short and its task
// run elsewhere), and while nothing is measured anywhere the generous
// First stands.
func (d Deadlines) OfWorker(exec, gridExec, rtt float64, overran time.Duration) time.Duration {
	base := d.Of(exec, gridExec, rtt)
	if exec > 0 || gridExec == 0 || overran <= 0 || base == 0 {
		return base
	}
	grown := d.Of(max(gridExec, float64(overran)), gridExec, rtt)
	if d.Ceiling > 0 {
		grown = min(grown, max(d.Ceiling, base))
	}
	return grown
}

// Overran is what OfWorker may count of a worker's overruns, the
// longest run cut short being overran: nothing while the worker is late
// (it has not answered since it overran). An overrun says that a worker
// is slow only once it answers; until then it may as well be silent, and
// each of the other instances it holds would otherwise get a deadline
// Factor times the one before (a silent worker that took three tasks of
// a batch at moments apart held them 30 s, then 2 min, then 5 min)
// where a silent worker costs one deadline.
func Overran(overran time.Duration, late bool) time.Duration {
	if late {
		return 0
	}
	return overran
}

// maxOverruns caps the doubling of Again.
const maxOverruns = 10

// Again is the deadline of an instance of a task that has overrun n
// deadlines already in its batch (each overdue instance is cancelled and
// its task sent again): Doubled, so that a task merely longer than its
// worker's deadline ends, on a lone worker too, while a hung evaluation
// costs one deadline. With a Ceiling, once an instance of the task was
// cut short at it (ceilinged: see AtCeiling), Again is 0: no deadline.
// Past the ceiling only the task timeout can tell a long task from a
// hang: cut at the ceiling again and again, a task longer than it and
// shorter than the timeout was sent again for ever, and so was one that
// hangs on every try, which never reached the timeout that fails it.
// The mark is the task's, not recomputed from n: on a worker whose own
// deadline is shorter, n doublings of it stay below the ceiling, and the
// task was cut short there again, its doublings begun anew.
func (d Deadlines) Again(base time.Duration, n int, ceilinged bool) time.Duration {
	if ceilinged && d.Ceiling > 0 {
		return 0
	}
	return d.Doubled(base, n)
}

// AtCeiling says an instance cut short at Again(base, n, false) was cut
// where the doubling stops: at the ceiling, or past it (a base longer),
// or at 2^10 times the base, below a ceiling longer than that (a task
// timeout of hours). Its task's later instances in the batch get no
// deadline. Marked at the ceiling alone, a task longer than 2^10 times
// its worker's deadline and shorter than the timeout was cut there for
// ever, and one that always hangs never failed.
func (d Deadlines) AtCeiling(base time.Duration, n int) bool {
	return d.Ceiling > 0 && (d.Doubled(base, n) >= d.Ceiling || n >= maxOverruns)
}

// Doubled is base doubled n times, at most 2^10 times and at most to
// Ceiling (unless base is longer): Again's deadlines below the ceiling,
// and a deadline that grows with each thing cut off (a child master
// stalled) without ever ending.
func (d Deadlines) Doubled(base time.Duration, n int) time.Duration {
	again := base << min(max(n, 0), maxOverruns)
	if d.Ceiling > 0 {
		again = min(again, max(base, d.Ceiling))
	}
	return again
}
