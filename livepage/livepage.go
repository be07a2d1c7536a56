// Package livepage serves a run's status page (esrun -metrics ADDR, at
// /): the ES's progress as the terminal's line gives it, and the grid's
// workers and the current generation's task instances, live, as a
// timeline per worker. Its data is at /status.json, bounded whatever the
// grid's size.
package livepage

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/report"
	"github.com/esgrid/esgrid/sched"
)

// The live page's bounds: what /status.json carries at most, whatever the
// grid's size (4096 workers, λ = 10^5 stay some 100 KB). The page says
// what it leaves out.
const (
	maxLiveWorkers   = 256  // rows of the workers' table and the timeline
	maxLiveInstances = 2000 // bars of the timeline, ended and running
)

//go:embed livepage.html
var livePageHTML []byte

// Master is what the live page reads from the master (a
// *grid.Master), each method safe from any goroutine.
type Master interface {
	WorkerStats() []grid.WorkerStat
	WorkerInfo(sched.WorkerID) (grid.WorkerInfo, bool)
	Outstanding(limit int) (now time.Duration, out []grid.OutInstance, more int)
}

// Page is the state behind esrun's status page (-metrics ADDR, at /): the
// ES's progress as the terminal's line gives it, the current
// generation's ended instances (the ledger's OnInstance) and, read from
// the master at each request, its workers and running instances.
type Page struct {
	policy, problem string
	master          Master // nil until the grid is up

	mu       sync.Mutex
	progress liveProgress
	gen      int              // the ledger's index of the current generation
	ended    []sched.Instance // its ended instances, at most maxLiveInstances
	omitted  int              // its ended instances beyond them
	results  map[sched.WorkerID]int
}

// liveProgress is the ES's progress after its last generation.
type liveProgress struct {
	Gen       int      `json:"gen"`
	Of        *int     `json:"of"` // null: no last generation (-target alone)
	Evals     int      `json:"evals"`
	EvalsPerS float64  `json:"evals_per_s"`
	ETA       *float64 `json:"eta_s"`   // null: unknown
	Best      *float64 `json:"best"`    // null before generation 0 or not finite
	Started   bool     `json:"started"` // a generation has completed
}

// New is the page of a run of problem under policy; SetMaster gives it
// the grid once it is up.
func New(policy, problem string) *Page {
	return &Page{policy: policy, problem: problem, results: map[sched.WorkerID]int{}}
}

// SetMaster gives the page the grid's master, once it is up; call it
// before the page is served.
func (l *Page) SetMaster(m Master) { l.master = m }

// Instance is the ledger's OnInstance: it runs on the master's loop, so
// it only appends, within bounds.
func (l *Page) Instance(in sched.Instance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case in.Gen < l.gen:
		return
	case in.Gen > l.gen:
		l.gen, l.ended, l.omitted = in.Gen, l.ended[:0], 0
		clear(l.results)
	}
	if in.Kind == sched.InstanceFinished {
		l.results[in.Worker]++
	}
	if len(l.ended) >= maxLiveInstances {
		l.omitted++
		return
	}
	l.ended = append(l.ended, in)
}

// Generation takes the ES's generation s, with the estimates of the
// terminal's line.
func (l *Page) Generation(s es.Stats, est *report.Progress) {
	p := liveProgress{Gen: s.Gen, Evals: s.Evals, EvalsPerS: est.Rate(), Started: true}
	if of, known := est.Last(); known {
		p.Of = &of
	}
	if d, ok := est.ETA(s.Gen); ok {
		sec := d.Seconds()
		p.ETA = &sec
	}
	if !math.IsNaN(s.Best) && !math.IsInf(s.Best, 0) {
		best := s.Best
		p.Best = &best
	}
	l.mu.Lock()
	l.progress = p
	l.mu.Unlock()
}

// liveStatus is /status.json. Times are seconds from the start of the
// timeline's window (the current generation's first instance).
type liveStatus struct {
	Policy  string `json:"policy"`
	Problem string `json:"problem"`
	liveProgress
	Workers      []liveWorker   `json:"workers"`
	MoreWorkers  int            `json:"more_workers"` // connected, not listed
	States       map[string]int `json:"states"`       // every worker's, by state
	Now          float64        `json:"now"`
	Instances    []liveInstance `json:"instances"`
	MoreInstance int            `json:"more_instances"` // of the current generation, not drawn
}

// liveWorker is a row of the workers' table and of the timeline.
type liveWorker struct {
	Name    string `json:"name"`
	Host    string `json:"host"`
	Slots   int    `json:"slots"`
	Busy    int    `json:"busy"` // instances running, in the master's books
	Held    int    `json:"held"` // instances in its remote queue
	State   string `json:"state"`
	Results int    `json:"results"` // finished instances this generation
}

// liveInstance is a bar of the timeline on row W (an index of workers).
type liveInstance struct {
	W     int     `json:"w"`
	Kind  string  `json:"k"` // original, replica, stale, cancelled, failed, running, held
	Start float64 `json:"s"`
	End   float64 `json:"e"`
}

// workerState is the word the page shows for a worker's state.
func workerState(w grid.WorkerStat) string {
	switch {
	case w.Aside:
		return "set aside"
	case w.Draining:
		return "draining"
	case w.Late:
		return "late"
	case w.Running > 0 || w.Outstanding > 0:
		return "working"
	}
	return "idle"
}

// status is a snapshot of the run for /status.json, bounded.
func (l *Page) status() liveStatus {
	st := liveStatus{Policy: l.policy, Problem: l.problem, States: map[string]int{},
		Workers: []liveWorker{}, Instances: []liveInstance{}}
	var (
		ws   []grid.WorkerStat
		out  []grid.OutInstance
		now  time.Duration
		more int
	)
	if l.master != nil {
		ws = l.master.WorkerStats()
		now, out, more = l.master.Outstanding(maxLiveInstances)
	}
	l.mu.Lock()
	st.liveProgress = l.progress
	ended := slices.Clone(l.ended)
	st.MoreInstance = l.omitted + more
	results := make(map[sched.WorkerID]int, len(l.results))
	for id, n := range l.results {
		results[id] = n
	}
	l.mu.Unlock()
	row := st.rows(l.master, ws, ended, results)
	st.bars(row, ended, out, now)
	return st
}

// rows lists the connected workers by name, then those that left during
// the generation, up to maxLiveWorkers, and returns each listed worker's
// row.
func (st *liveStatus) rows(m Master, ws []grid.WorkerStat, ended []sched.Instance, results map[sched.WorkerID]int) map[sched.WorkerID]int {
	slices.SortFunc(ws, func(a, b grid.WorkerStat) int { return strings.Compare(a.Name, b.Name) })
	row := map[sched.WorkerID]int{}
	addRow := func(id sched.WorkerID, w liveWorker) {
		st.States[w.State]++
		if len(st.Workers) >= maxLiveWorkers {
			st.MoreWorkers++
			return
		}
		row[id] = len(st.Workers)
		st.Workers = append(st.Workers, w)
	}
	connected := make(map[sched.WorkerID]bool, len(ws))
	for _, w := range ws {
		connected[w.ID] = true
		info, _ := m.WorkerInfo(w.ID)
		// Busy and held as the master's books have them (the first
		// slots of its instances run), fresher than its last status.
		busy := min(w.Outstanding, w.Slots)
		addRow(w.ID, liveWorker{Name: w.Name, Host: info.Host, Slots: w.Slots, Busy: busy, Held: w.Outstanding - busy,
			State: workerState(w), Results: results[w.ID]})
	}
	left := map[sched.WorkerID]bool{}
	for _, in := range ended {
		if m == nil || connected[in.Worker] || left[in.Worker] {
			continue
		}
		left[in.Worker] = true
		info, _ := m.WorkerInfo(in.Worker)
		if info.Name == "" {
			info.Name = fmt.Sprintf("worker %d", in.Worker)
		}
		addRow(in.Worker, liveWorker{Name: info.Name, Host: info.Host, State: "left", Results: results[in.Worker]})
	}
	return row
}

// bars draws the generation's instances on the workers' rows, in the
// window from its first instance to now, up to maxLiveInstances.
func (st *liveStatus) bars(row map[sched.WorkerID]int, ended []sched.Instance, out []grid.OutInstance, now time.Duration) {
	t0 := now
	for _, in := range ended {
		t0 = min(t0, in.Start)
	}
	for _, o := range out {
		t0 = min(t0, o.Sent)
	}
	sec := func(d time.Duration) float64 { return math.Round((d-t0).Seconds()*1e4) / 1e4 }
	st.Now = sec(now)
	bar := func(w sched.WorkerID, kind string, start, end time.Duration) {
		r, ok := row[w]
		if !ok || len(st.Instances) >= maxLiveInstances {
			st.MoreInstance++
			return
		}
		st.Instances = append(st.Instances, liveInstance{W: r, Kind: kind, Start: sec(start), End: sec(end)})
	}
	for _, in := range ended {
		bar(in.Worker, liveKind(in), in.Start, in.End)
	}
	for _, o := range out {
		if o.Started >= 0 {
			bar(o.Worker, "running", o.Started, now)
		} else {
			bar(o.Worker, "held", o.Sent, now)
		}
	}
}

// liveKind is the colour of an ended instance's bar.
func liveKind(in sched.Instance) string {
	switch k := report.InstanceKind(in); k {
	case "cancelled_held", "cancelled_running":
		return "cancelled"
	default:
		return k
	}
}

// Handler serves the page at / and its data at /status.json, GET (and
// HEAD) only; anything else under / is not found.
func (l *Page) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		// The page needs nothing but itself and /status.json.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		w.Write(livePageHTML)
	})
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, r *http.Request) {
		b, err := json.Marshal(l.status())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		w.Write(b)
	})
	return mux
}
