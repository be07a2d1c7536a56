// Package bag runs a bag of independent tasks over the grid as one batch,
// not an ES generation: the Mandelbrot strips of the Clop paper (docs/papers.md
// §5, file 004), under any scheduling policy. It measures each worker's
// compute total and speed, checks every strip against a reference
// computed in one process, and predicts the bag's time for the speeds it
// measured with the simulator (sched/sim).
//
// Workers offer the strips as a plugin named Name(strips, maxIter, size);
// Plugin serves one.
package bag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/atomicfile"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/sched/sim"
)

// named renames a problem to the plugin name a master asks for.
type named struct {
	problems.Problem
	name string
}

func (n named) Name() string { return n.name }

// Plugin is the problem a plugin named name (mandel-STRIPS-MAXITER-SIZE)
// serves: the strips of that image, under that name.
func Plugin(name string) (problems.Problem, error) {
	m, err := ParseName(name)
	if err != nil {
		return nil, err
	}
	p, err := m.Problem()
	if err != nil {
		return nil, err
	}
	return named{p, name}, nil
}

// Image is the bag's image: the paper's region and size, with a cap on
// iterations that fits a shared machine (the paper's 300,000 makes one
// image hours of CPU; 10,000 makes it seconds, with strips through the set
// still costing hundreds of times the others).
func Image(strips, maxIter, size int) problems.Mandelbrot {
	m := problems.PaperMandelbrot(strips)
	m.MaxIter, m.Width, m.Height = maxIter, size, size
	return m
}

// Name is the plugin name of a bag: mandel-STRIPS-MAXITER-SIZE.
func Name(strips, maxIter, size int) string {
	return fmt.Sprintf("mandel-%d-%d-%d", strips, maxIter, size)
}

// ParseName is the image a plugin name describes; a name not of the form
// mandel-STRIPS-MAXITER-SIZE, or with a count outside [1, 1000000], is
// an error.
func ParseName(name string) (problems.Mandelbrot, error) {
	f := strings.Split(name, "-")
	if len(f) != 4 || f[0] != "mandel" {
		return problems.Mandelbrot{}, fmt.Errorf("plugin name %q: want mandel-STRIPS-MAXITER-SIZE", name)
	}
	var n [3]int
	for i := range n {
		v, err := strconv.Atoi(f[i+1])
		if err != nil || v < 1 || v > 1_000_000 {
			return problems.Mandelbrot{}, fmt.Errorf("plugin name %q: %q is not a count in [1, 1000000]", name, f[i+1])
		}
		n[i] = v
	}
	m := Image(n[0], n[1], n[2])
	return m, m.Validate()
}

// Reference is each strip's exact value and cost, computed here one at a
// time: the value a grid run must reproduce, and the grains of the
// simulator's bag.
type Reference struct {
	Name    string  `json:"name"`
	Strips  int     `json:"strips"`
	Values  []int64 `json:"values"`  // iteration counts, exact
	Seconds float64 `json:"seconds"` // the whole image, here
	// NsPerIter is Seconds over Σ Values: each strip's cost is its value
	// times this, a deterministic measure of its work.
	NsPerIter float64 `json:"ns_per_iter"`
}

// Grain is strip i's cost on the machine that computed the reference.
func (r *Reference) Grain(i int) time.Duration {
	return max(time.Duration(float64(r.Values[i])*r.NsPerIter), time.Microsecond)
}

// Iterations is the image's total: Σ Values.
func (r *Reference) Iterations() int64 {
	var sum int64
	for _, v := range r.Values {
		sum += v
	}
	return sum
}

// NewReference computes every strip of the image here, one at a time.
func NewReference(ctx context.Context, strips, maxIter, size int) (*Reference, error) {
	m := Image(strips, maxIter, size)
	ref := &Reference{Name: Name(strips, maxIter, size), Strips: strips, Values: make([]int64, strips)}
	start := time.Now()
	for i := range strips {
		v, err := m.Strip(ctx, i)
		if err != nil {
			return nil, err
		}
		ref.Values[i] = v
	}
	ref.Seconds = time.Since(start).Seconds()
	ref.NsPerIter = ref.Seconds * 1e9 / float64(max(ref.Iterations(), 1))
	return ref, nil
}

// Write writes the reference to path as JSON, whole or not at all
// (atomicfile.Write): a full disk leaves the reference that was there.
func (r *Reference) Write(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, 0o644, b)
}

// maxReferenceBytes bounds a reference file: one of the most strips a
// size takes (4800, of at most 12 digits each) is some 80 KB, and no image
// of the paper's work has more than 10⁶ strips (about 16 MB).
const maxReferenceBytes = 32 << 20

// ReadReference reads the reference at path, which must be of the image
// name with its strips. It reads only a regular file of at most
// maxReferenceBytes: -reference /dev/zero was read until the memory ran
// out.
func ReadReference(path, name string, strips int) (*Reference, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reference: %w (make it with -inprocess)", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("reference %s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReferenceBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reference %s: %w", path, err)
	}
	if len(b) > maxReferenceBytes {
		return nil, fmt.Errorf("reference %s is larger than %d bytes: not a reference", path, maxReferenceBytes)
	}
	var ref Reference
	if err := json.Unmarshal(b, &ref); err != nil {
		return nil, fmt.Errorf("reference %s: %w", path, err)
	}
	if ref.Name != name || len(ref.Values) != strips {
		return nil, fmt.Errorf("reference %s is of %s, not %s", path, ref.Name, name)
	}
	// The costs become the simulator's grains: a negative, or one past an
	// hour a strip, is not a measure (and would overflow a Duration).
	if !(ref.NsPerIter > 0 && ref.NsPerIter <= 1e9) {
		return nil, fmt.Errorf("reference %s: ns_per_iter %g, want above 0 and at most 1e9", path, ref.NsPerIter)
	}
	for i, v := range ref.Values {
		if v < 0 || float64(v)*ref.NsPerIter > float64(time.Hour) {
			return nil, fmt.Errorf("reference %s: strip %d costs %d iterations of %g ns: not a strip's cost", path, i, v, ref.NsPerIter)
		}
	}
	return &ref, nil
}

// WorkerFigures is one worker's part of a run.
type WorkerFigures struct {
	Name      string  `json:"name"`
	Slots     int     `json:"slots"`
	Compute   float64 `json:"compute_s"`  // Σ execution time of its slots in the bag, replicas that lost included
	Strips    int     `json:"strips"`     // results of the bag accepted from it
	RoundTrip float64 `json:"round_trip"` // smallest round trip measured
	Speed     float64 `json:"speed"`      // reference cost of its accepted strips / their time there
}

// Figures are a run's results.
type Figures struct {
	Name      string          `json:"name"`
	Policy    string          `json:"policy"`
	Strips    int             `json:"strips"`
	Total     float64         `json:"total_s"` // the bag, from its start to its last result
	Predicted float64         `json:"predicted_s"`
	Optimum   float64         `json:"optimum_s"` // the clairvoyant floor for the measured speeds
	Replicas  int             `json:"replicas"`
	Identical bool            `json:"identical"` // every value equals the reference's
	Workers   []WorkerFigures `json:"workers"`
	Imbalance float64         `json:"imbalance"` // max / mean of the workers' compute per slot
	// Values are the strips' values as the grid returned them.
	Values []float64 `json:"-"`
}

// Config is one bag on one master.
type Config struct {
	Policy     string // the scheduling policy (sched.Names)
	Copies     int    // eft: most live instances of a task (0: the default)
	MinWorkers int    // workers to wait for before the bag starts
	Listen     string // the master's data HOST:PORT
	Gossip     string // the master's gossip HOST:PORT, which workers join
	Key        *grid.Key
	Noise      float64 // the prediction's noise sigma on task times
	Logger     *slog.Logger
}

// Run runs the bag of ref's strips on a grid: a master on cfg.Listen,
// gossip on cfg.Gossip, workers that offer the plugin ref.Name. It
// returns the figures once every strip has a result, or ctx's error; if
// only the prediction fails, the figures measured and the error.
func Run(ctx context.Context, cfg Config, ref *Reference) (*Figures, error) {
	// Who returned each strip, and how long it took there.
	type accepted struct {
		worker string
		exec   time.Duration
	}
	var mu sync.Mutex
	got := make([]accepted, ref.Strips)
	m, err := grid.NewMaster(context.Background(), grid.MasterConfig{
		Listen: cfg.Listen, Key: cfg.Key, Policy: cfg.Policy, Logger: cfg.Logger,
		Problem: grid.ProblemSpec{Name: ref.Name, Dim: 1},
		Sched:   sched.Config{Copies: cfg.Copies},
		OnAccept: func(gen, task int, worker string, exec time.Duration) {
			if gen == 0 && task >= 0 && task < len(got) {
				mu.Lock()
				got[task] = accepted{worker, exec}
				mu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	host, portText, err := net.SplitHostPort(cfg.Gossip)
	if err != nil {
		return nil, fmt.Errorf("-gossip: %w", err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("-gossip: %w", err)
	}
	ms, err := grid.JoinMembership(context.Background(), grid.MembershipConfig{
		BindAddr: host, BindPort: port, SecretKey: cfg.Key.GossipKey(),
		Meta:    grid.NodeMeta{Role: grid.RoleMaster, DataAddr: m.Addr()},
		OnEvent: m.HandleMemberEvent, Logger: cfg.Logger, LeaveTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	defer ms.Close()
	if err := m.WaitWorkers(ctx, cfg.MinWorkers); err != nil {
		return nil, err
	}

	// The bag.
	xs := make([][]float64, ref.Strips)
	for i := range xs {
		xs[i] = []float64{float64(i)}
	}
	vals, err := m.Evaluate(ctx, 0, xs)
	if err != nil {
		return nil, fmt.Errorf("bag: %w", err)
	}
	rep := m.Report()
	fig := &Figures{Name: ref.Name, Policy: cfg.Policy, Strips: ref.Strips, Identical: true, Values: vals}
	for i, v := range vals {
		if v != float64(ref.Values[i]) {
			fig.Identical = false
		}
	}
	bag := rep.Generations[len(rep.Generations)-1]
	fig.Total = bag.Total.Seconds()
	fig.Replicas = bag.Replicas
	mu.Lock()
	work, took := map[string]time.Duration{}, map[string]time.Duration{}
	for i, a := range got {
		work[a.worker] += ref.Grain(i)
		took[a.worker] += a.exec
	}
	mu.Unlock()
	for _, w := range rep.Workers {
		info, _ := m.WorkerInfo(w.Worker)
		wf := WorkerFigures{Name: info.Name, Slots: w.Slots, Compute: w.Busy.Seconds(), Strips: w.Accepted, RoundTrip: w.RoundTrip.Seconds()}
		if took[info.Name] > 0 {
			wf.Speed = work[info.Name].Seconds() / took[info.Name].Seconds()
		}
		fig.Workers = append(fig.Workers, wf)
	}
	slices.SortFunc(fig.Workers, func(a, b WorkerFigures) int { return strings.Compare(a.Name, b.Name) })
	fig.Imbalance = Imbalance(fig.Workers)
	fig.Predicted, fig.Optimum, err = Predict(cfg.Policy, cfg.Copies, cfg.Noise, ref, fig.Workers)
	if err != nil {
		return fig, fmt.Errorf("prediction: %w", err)
	}
	return fig, nil
}

// Imbalance is the largest worker's compute time per slot over the mean
// (1: every slot worked as long).
func Imbalance(ws []WorkerFigures) float64 {
	var sum, hi float64
	n := 0
	for _, w := range ws {
		if w.Slots == 0 {
			continue
		}
		per := w.Compute / float64(w.Slots)
		sum += per * float64(w.Slots)
		n += w.Slots
		hi = max(hi, per)
	}
	if sum == 0 {
		return 0
	}
	return hi / (sum / float64(n))
}

// Predict simulates the bag under policy on the workers as measured: each
// a machine with its slots, its measured speed against the reference and
// half its round trip each way; the bag's grains are the reference's
// strip costs. It returns the simulated total and the clairvoyant floor.
func Predict(policy string, copies int, noise float64, ref *Reference, ws []WorkerFigures) (total, floor float64, err error) {
	var sb strings.Builder
	sb.WriteString("master cost=25us\n") // the real master's cost per message, as measured (issue 16)
	for i, w := range ws {
		if w.Speed <= 0 || math.IsInf(w.Speed, 0) || math.IsNaN(w.Speed) {
			// It returned no strip: as slow as the slowest that did.
			w.Speed = math.Inf(1)
			for _, v := range ws {
				if v.Speed > 0 {
					w.Speed = min(w.Speed, v.Speed)
				}
			}
			if math.IsInf(w.Speed, 1) {
				return 0, 0, errors.New("no worker returned a strip")
			}
		}
		// A machine by its place, not its worker's name, which the worker
		// chose: "x#y", or "a b" beside "a_b", made no set after the whole
		// bag had run. Its slots as many as the set takes.
		// Its delay at most what a set takes (an hour): a longer one
		// failed the prediction once the whole bag had run.
		delay := sim.MaxLinkTime
		if d := w.RoundTrip / 2 * float64(time.Second); d >= 0 && d < float64(sim.MaxLinkTime) {
			delay = time.Duration(d)
		}
		fmt.Fprintf(&sb, "machine w%d cpus=%d speed=%g delay=%s\n", i+1, min(max(w.Slots, 1), sim.MaxCPUs), w.Speed, delay)
	}
	set, err := sim.ParseSet("measured", strings.NewReader(sb.String()))
	if err != nil {
		return 0, 0, err
	}
	grains := make([]time.Duration, ref.Strips)
	for i := range grains {
		grains[i] = ref.Grain(i)
	}
	res, err := sim.Run(sim.Config{Set: set, Policy: policy, PolicyConfig: sched.Config{Copies: copies},
		Workload: sim.Bag(grains), Noise: noise, Seed: 1})
	if err != nil {
		return 0, 0, err
	}
	return res.Report.Total.Seconds(), res.Optimum.LB.Seconds(), nil
}

// Print writes the figures as text: the bag's total beside the
// prediction and the floor, then a line per worker.
func (f *Figures) Print(w io.Writer) {
	same := "every strip equals the reference"
	if !f.Identical {
		same = "STRIPS DIFFER from the reference"
	}
	fmt.Fprintf(w, "%s %s: %d strips in %.2f s (simulated for the measured speeds: %.2f s, %+.1f%%; floor %.2f s, eff %.1f%%), %d replicas; %s\n",
		f.Name, f.Policy, f.Strips, f.Total, f.Predicted, 100*(f.Predicted/f.Total-1), f.Optimum, 100*f.Optimum/f.Total, f.Replicas, same)
	fmt.Fprintf(w, "  %-8s %5s %10s %7s %9s %8s %9s\n", "worker", "slots", "compute s", "strips", "speed", "rtt ms", "per slot")
	for _, x := range f.Workers {
		fmt.Fprintf(w, "  %-8s %5d %10.2f %7d %9.3f %8.1f %9.2f\n", x.Name, x.Slots, x.Compute, x.Strips, x.Speed, 1000*x.RoundTrip, x.Compute/float64(max(x.Slots, 1)))
	}
	fmt.Fprintf(w, "  imbalance (largest compute per slot / mean): %.2f\n", f.Imbalance)
}
