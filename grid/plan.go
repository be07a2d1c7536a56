package grid

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/esgrid/esgrid/internal/strictjson"
	"github.com/esgrid/esgrid/sched"
)

// A plan says which workers a run uses and with how many slots each
// (docs/papers.md §4: which machines are worth using, with how many processes).
// esplan writes it; the master and esworker act on the same file: esworker
// -plan takes its slots from it, and the master (MasterConfig.Plan, esrun
// -plan) gives every worker that joins the plan's slots, or sets it aside
// (slots 0: it receives no tasks), as a policy event (sched.SlotsChanged).

// PlanVersion is the plan file's format.
const PlanVersion = 1

// MaxPlanBytes bounds a plan file.
const MaxPlanBytes = 4 << 20

// Plan is a plan file.
type Plan struct {
	Version int `json:"version"`
	// Workers names workers and their slots; 0 sets a worker aside.
	Workers []PlanWorker `json:"workers"`
	// Groups give the slots of a worker the plan does not name, by its
	// group (GroupOf its name); 0 sets it aside.
	Groups []PlanGroup `json:"groups,omitempty"`
	// What the plan was made for and what it predicts (for people; the
	// master and esworker act on Workers and Groups only).
	N               int     `json:"n,omitempty"`
	Tasks           int     `json:"tasks,omitempty"`
	Config          string  `json:"config,omitempty"`
	PredictedBatch  float64 `json:"predicted_batch,omitempty"`
	BaselineBatch   float64 `json:"baseline_batch,omitempty"`
	BaselineConfig  string  `json:"baseline_config,omitempty"`
	PredictedGainPc float64 `json:"predicted_gain_percent,omitempty"`
}

// PlanWorker is one named worker's slots, and the time one task of the
// plan's size N is predicted to take on it in the planned configuration.
type PlanWorker struct {
	Name  string `json:"name"`
	Group string `json:"group,omitempty"`
	Slots int    `json:"slots"`
	// Exec is the predicted time of one task, in seconds (0: none). A
	// master whose policy uses measurements (eft, adaptive rwq and r3q)
	// takes it as the worker's first measurement, so that the first
	// generation is planned with the worker's speed rather than blind.
	Exec float64 `json:"exec,omitempty"`
}

// PlanGroup is the slots of a group's workers that the plan does not name.
type PlanGroup struct {
	Group string `json:"group"`
	Slots int    `json:"slots"`
}

// ReadPlan reads and checks a plan file.
func ReadPlan(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer f.Close()
	p, err := DecodePlan(f)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	return p, nil
}

// DecodePlan reads and checks a plan (at most MaxPlanBytes).
func DecodePlan(r io.Reader) (*Plan, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxPlanBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxPlanBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxPlanBytes)
	}
	if err := strictjson.DuplicateKeys(b); err != nil {
		return nil, err // a second "slots" of a worker would win silently
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	return &p, p.Check()
}

// Check says what is wrong with a plan, if anything.
func (p *Plan) Check() error {
	if p.Version != PlanVersion {
		return fmt.Errorf("plan format %d, this program reads %d", p.Version, PlanVersion)
	}
	seen := map[string]bool{}
	for _, w := range p.Workers {
		switch {
		case w.Name == "":
			return errors.New("a worker without a name")
		case seen[w.Name]:
			return fmt.Errorf("worker %q twice", w.Name)
		case w.Slots < 0 || w.Slots > MaxMetaSlots:
			return fmt.Errorf("worker %q: slots %d outside [0, %d]", w.Name, w.Slots, MaxMetaSlots)
		case !(w.Exec >= 0) || w.Exec > 1e6:
			return fmt.Errorf("worker %q: exec %v s outside [0, 1e6]", w.Name, w.Exec)
		}
		seen[w.Name] = true
	}
	groups := map[string]bool{}
	for _, g := range p.Groups {
		switch {
		case g.Group == "":
			return errors.New("a group without a name")
		case groups[g.Group]:
			return fmt.Errorf("group %q twice", g.Group)
		case g.Slots < 0 || g.Slots > MaxMetaSlots:
			return fmt.Errorf("group %q: slots %d outside [0, %d]", g.Group, g.Slots, MaxMetaSlots)
		}
		groups[g.Group] = true
	}
	return nil
}

// SlotsFor is the slots the plan gives the worker called name: its own
// entry, else its group's (GroupOf), 0 meaning set aside; false when the
// plan says nothing about it (it keeps its own slots).
func (p *Plan) SlotsFor(name string) (int, bool) {
	if p == nil {
		return 0, false
	}
	for _, w := range p.Workers {
		if w.Name == name {
			return w.Slots, true
		}
	}
	g := GroupOf(name)
	for _, r := range p.Groups {
		if r.Group == g {
			return r.Slots, true
		}
	}
	return 0, false
}

// ExecFor is the predicted task time the plan gives the worker called
// name, for tasks of LU size loadN: false when it gives none, or when the
// plan was made for another size (its prediction would be wrong).
func (p *Plan) ExecFor(name string, loadN int) (time.Duration, bool) {
	if p == nil || p.N != loadN {
		return 0, false
	}
	for _, w := range p.Workers {
		if w.Name == name && w.Exec > 0 && w.Slots > 0 {
			return time.Duration(w.Exec * float64(time.Second)), true
		}
	}
	return 0, false
}

// GroupOf is the machine group of a worker called name: the name without
// its trailing "-<number>" parts ("lab-pc-12" and "lab-pc-13" are group
// "lab-pc"; esworker's default name hostname-pid is group hostname). A
// group is meant to be identical machines (same hardware, same CPUs; the
// paper's unit of measurement): name the workers so (esworker -name).
// The name is what a worker already gives, authenticated, in its Hello,
// and what the master's reports and a plan file name it by; the CPU model
// a machine could report instead cannot tell an emulated slower machine
// (esworker -slowdown) from a fast one, nor a loaded machine from an idle
// one, and esplan checks the grouping against the times it measures.
func GroupOf(name string) string {
	g := name
	for {
		i := strings.LastIndexByte(g, '-')
		if i <= 0 || i == len(g)-1 || strings.Trim(g[i+1:], "0123456789") != "" {
			return g
		}
		g = g[:i]
	}
}

// SetSlots changes the slots the policy gives the worker numbered id (0
// sets it aside: it receives no tasks until given slots again), as the
// event sched.SlotsChanged. The worker's own concurrency is its own
// (esworker -slots, or -plan): the policy never sends it more than its
// capacity for the new slots. It fails for a worker not connected.
func (m *Master) SetSlots(id sched.WorkerID, slots int) error {
	if slots < 0 || slots > MaxMetaSlots {
		return fmt.Errorf("grid: slots %d outside [0, %d]", slots, MaxMetaSlots)
	}
	err := ErrMasterClosed
	m.ask(func() {
		w := m.byID[id]
		if w == nil || w.left {
			err = fmt.Errorf("grid: no worker %d connected", id)
			return
		}
		m.setSlots(w, slots)
		err = nil
	})
	return err
}

// setSlots steps SlotsChanged for w, on the loop.
func (m *Master) setSlots(w *mworker, slots int) {
	m.step(sched.Event{Kind: sched.SlotsChanged, Worker: w.id, Slots: slots}, 0)
}

// applyPlan gives a worker that has just joined the slots the plan has
// for it, and to a policy that uses measurements (sched.Measures) the
// task time the plan predicts for it as a first measurement; on the loop.
func (m *Master) applyPlan(w *mworker) {
	if d, ok := m.cfg.Plan.ExecFor(w.name, m.cfg.Problem.LoadN); ok && m.adaptive {
		// Measured in the simulator (sched/plan, TestModelPriorsInSimulation):
		// eft with the models' priors ends a 5-generation run 17 % sooner
		// on a spread set (hetero9), 1.5 % a 100-generation one.
		m.step(sched.Event{Kind: sched.Measured, Worker: w.id, Exec: d}, 0)
	}
	slots, ok := m.cfg.Plan.SlotsFor(w.name)
	switch {
	case !ok:
		if m.cfg.Plan != nil {
			m.log.Info("the plan does not name this worker; it keeps its own slots", "worker", w.name, "slots", w.slots)
		}
		return
	case slots == 0:
		m.log.Info("the plan sets this worker aside: it receives no tasks", "worker", w.name, "worker_id", w.id)
	case slots != w.slots:
		m.log.Warn("the plan gives this worker other slots than it runs; start its esworker with the same -plan",
			"worker", w.name, "worker_id", w.id, "plan_slots", slots, "worker_slots", w.slots)
	default:
		return
	}
	m.setSlots(w, slots)
}
