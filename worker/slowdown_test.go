package worker

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/cputime"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
)

func TestSlowdownWait(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name     string
		f        float64
		d, cpu   time.Duration
		byCPU    bool
		wantWait time.Duration
	}{
		{"wall clock", 3, 20 * ms, 0, false, 40 * ms},
		{"CPU, uncontended", 3, 20 * ms, 20 * ms, true, 40 * ms},
		// Another process had half the core: the evaluation took twice its
		// CPU time, and the machine three times slower still ends at 3·cpu.
		{"CPU, shared core", 3, 40 * ms, 20 * ms, true, 20 * ms},
		{"CPU, shared more than F times", 1.5, 40 * ms, 20 * ms, true, 0},
		{"no CPU used", 4, 10 * ms, 0, true, 0},
	}
	for _, c := range cases {
		if got := slowdownWait(c.f, c.d, c.cpu, c.byCPU); got != c.wantWait {
			t.Errorf("%s: slowdownWait(%v, %v, %v, %v) = %v, want %v", c.name, c.f, c.d, c.cpu, c.byCPU, got, c.wantWait)
		}
	}
}

// spinProblem computes (spins) until its thread has used cpu.
type spinProblem struct{ cpu time.Duration }

func (spinProblem) Name() string                   { return "spin" }
func (spinProblem) Bounds() (lower, upper float64) { return 0, 1 }
func (p spinProblem) Eval(ctx context.Context, x []float64) (float64, error) {
	c0, ok := cputime.Thread()
	if !ok {
		time.Sleep(p.cpu)
		return x[0], nil
	}
	for {
		c, _ := cputime.Thread()
		if c-c0 >= p.cpu || ctx.Err() != nil {
			return x[0], ctx.Err()
		}
	}
}

// A slot slowed down by F that computes for c of CPU answers no sooner
// than F·c after it began: the emulated machine's time, whatever shares
// the cores.
func TestAgentSlowdownByCPU(t *testing.T) {
	leaktest.Check(t)
	if _, ok := cputime.Thread(); !ok {
		t.Skip("this system cannot tell a thread's CPU time")
	}
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "spin", Dim: 1})
	const cpu, slowdown = 20 * time.Millisecond, 3
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Config{
		Master: fm.addr(), Key: key, Slots: 2, Slowdown: slowdown, Logger: logger(io.Discard),
		Build: func(grid.ProblemSpec) (problems.Problem, error) { return spinProblem{cpu}, nil },
	}
	_, wait := startAgent(t, ctx, cfg)
	mc := fm.next()
	mc.c.Send(tasks(0, 4, 5))
	for got := 0; got < 2; {
		rs := receive[*grid.Results](t, mc)
		for _, r := range rs.Items {
			got++
			if r.Err != "" {
				t.Errorf("result %+v", r)
			}
			if min := time.Duration(slowdown) * cpu; time.Duration(r.Exec) < min {
				t.Errorf("task %d: Exec %v with slowdown %d of %v of CPU, want ≥ %v", r.ID, time.Duration(r.Exec), slowdown, cpu, min)
			}
		}
	}
	cancel()
	wait()
}

// closerProblem stands for a plugin: it holds resources and computes in
// another process.
type closerProblem struct{ spinProblem }

func (closerProblem) Close() error { return nil }

func TestSlowdownTimedByCPUOnlyForComputeHere(t *testing.T) {
	cases := []struct {
		name string
		p    problems.Problem
		wall bool
		want bool
	}{
		{"built in", spinProblem{}, false, true},
		{"plugin", closerProblem{}, false, false},
		{"SlowdownWall", spinProblem{}, true, false},
	}
	for _, c := range cases {
		a := &Agent{cfg: Config{Slowdown: 2, SlowdownWall: c.wall}}
		s := newSession(t.Context(), a, nil, c.p)
		if s.byCPU != c.want {
			t.Errorf("%s: timed by CPU = %v, want %v", c.name, s.byCPU, c.want)
		}
		s.cancel()
	}
}
