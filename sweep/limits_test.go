package sweep

import (
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched/sim"
)

// CheckLimits refuses a config beyond a run's bounds, naming its fields
// as the caller's names say (or as themselves), and accepts one within.
func TestCheckLimits(t *testing.T) {
	set, err := sim.LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	base := func() *Config {
		return &Config{Set: set, Policies: []string{"wq", "cyclic"}, Grains: []time.Duration{time.Second}, Delays: []time.Duration{0},
			Workload: "es", Mu: 30, Lambda: 70, Gens: 10, Trials: 1, Parallel: 1}
	}
	if err := base().CheckLimits(nil); err != nil {
		t.Fatalf("a small sweep: %v", err)
	}
	names := map[string]string{"Lambda": "-lambda", "Gens": "-gens", "Mu": "-mu", "Grains": "-grain", "Policies": "-policy"}
	for _, tt := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Grains = []time.Duration{2 * time.Hour} }, "-grain: 2h0m0s is longer than 1h0m0s"},
		{func(c *Config) { c.EngineCost = 2 * time.Hour }, "EngineCost: 2h0m0s is longer than 1h0m0s"},
		{func(c *Config) { c.Slowdowns = []sim.Slowdown{{Machine: "M1", Factor: 1e7}} }, "Slowdowns M1: factor 1e+07 is larger than 1e+06"},
		{func(c *Config) { c.Lambda = MaxBatchTasks + 1 }, "-lambda must be at most 1000000, got 1000001"},
		{func(c *Config) { c.Gens = 1_000_000 }, "one run would have 70000030 tasks, more than 10000000; lower -gens, -lambda or -mu"},
		{func(c *Config) { c.Workload, c.Tasks = "bag", MaxBatchTasks+1 }, "Tasks must be at most 1000000"},
		{func(c *Config) { c.Lambda, c.Gens = 1_000_000, 9 }, "leave cyclic out of -policy"},
		{func(c *Config) {
			c.Grains, c.Gens, c.Lambda, c.Mu, c.Policies = []time.Duration{time.Hour}, MaxRunTasks, 1, 0, []string{"r3q"}
		}, "years of simulated time"},
		// A day's tasks on the LAN set, 7,030 of them: at least 915 days
		// of simulated time, 3.2·10⁸ ticks. Within the century, it was
		// accepted, and each run was minutes of ticks.
		{func(c *Config) {
			c.Grains, c.Gens, c.Policies = []time.Duration{time.Hour}, 100, []string{"r3q"}
			c.Set = slowLAN(t, set)
		}, "of the master's ticks"},
	} {
		c := base()
		tt.edit(c)
		if err := c.CheckLimits(names); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v, want %q", err, tt.want)
		}
	}
}

// slowLAN is the LAN set with every machine 24 times slower.
func slowLAN(t *testing.T, set *sim.Set) *sim.Set {
	t.Helper()
	slow := *set
	slow.Machines = append([]sim.Machine(nil), set.Machines...)
	for i := range slow.Machines {
		m := &slow.Machines[i]
		m.Times = append([]sim.GrainTime(nil), m.Times...)
		for j := range m.Times {
			m.Times[j].Time *= 24
		}
	}
	return &slow
}
