package grid

import (
	"fmt"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// TestFreshDeadlineFromHosts: a worker with no time of its own is given
// its deadline by the upper median of the hosts' times, not by the mean
// of every result, which a liar's thousand results of 1 ns drive to the
// floor. On as many hosts as the honest ones measured, the liar can
// lengthen that deadline (the task timeout bounds it), not shorten it;
// on fewer it moves it neither way; on more it sets it, as it wins
// -verify's vote; an excluded host's time is struck.
func TestFreshDeadlineFromHosts(t *testing.T) {
	m := bareMaster(MasterConfig{DeadlineFactor: 4, DeadlineFloor: time.Second, FirstDeadline: 30 * time.Second, TaskTimeout: 10 * time.Minute})
	liar := &mworker{id: 1, name: "liar", host: "10.0.0.1", slots: 1}
	honest := &mworker{id: 2, name: "honest", host: "10.0.0.2", slots: 1}
	fresh := &mworker{id: 3, name: "fresh", host: "10.0.0.3", slots: 1}
	liar2 := &mworker{id: 4, name: "liar-2", host: "10.0.0.4", slots: 1}
	honest2 := &mworker{id: 5, name: "honest-2", host: "10.0.0.5", slots: 1}
	if d := m.deadline(fresh); d != m.cfg.FirstDeadline {
		t.Fatalf("nothing measured: deadline %v, want the first deadline", d)
	}
	m.measured(honest, 2*time.Second)
	for range 1000 {
		m.measured(liar, time.Nanosecond)
	}
	if d := m.cfg.deadlines().Of(0, m.exec, 0); d != m.cfg.DeadlineFloor {
		t.Fatalf("setup: the mean of every result gives %v, want the floor", d)
	}
	if d := m.deadline(fresh); d != 8*time.Second {
		t.Errorf("liar beside one honest host: deadline %v, want 4 × the honest host's 2 s", d)
	}
	m.measured(liar2, time.Nanosecond)
	if d := m.deadline(fresh); d != m.cfg.DeadlineFloor {
		t.Errorf("liar on two hosts against one: deadline %v, want the floor (the liar outvotes)", d)
	}
	m.measured(honest2, 2*time.Second)
	if d := m.deadline(fresh); d != 8*time.Second {
		t.Errorf("liar on two hosts against two: deadline %v, want 8 s", d)
	}
	m.hosts.exclude(liar.host)
	m.hosts.exclude(liar2.host)
	m.measured(liar, time.Nanosecond) // a result that was on its way
	if d := m.deadline(fresh); d != 8*time.Second {
		t.Errorf("liars excluded: deadline %v, want 8 s", d)
	}

	// Times of an hour lengthen it, with one honest host; with two, the
	// median is honest again.
	m.hosts = hostTimes{}
	honest, honest2 = &mworker{id: 6, host: "10.0.0.2"}, &mworker{id: 7, host: "10.0.0.5"}
	m.measured(honest, 2*time.Second)
	m.measured(&mworker{id: 8, host: "10.0.0.6"}, time.Hour)
	if d := m.deadline(fresh); d != 4*time.Hour {
		t.Errorf("liar claiming an hour beside one honest host: deadline %v, want 4 h", d)
	}
	m.measured(honest2, 2*time.Second)
	if d := m.deadline(fresh); d != 8*time.Second {
		t.Errorf("liar claiming an hour beside two honest hosts: deadline %v, want 8 s", d)
	}
	// A worker with a time of its own keeps it.
	if d := m.deadline(honest); d != 8*time.Second {
		t.Errorf("a measured worker's deadline %v, want 4 × its own 2 s", d)
	}
}

// TestHostTimesBounded: the hosts' book keeps the first maxNamesKept
// hosts measured; the others' times count for nothing, and cost the book
// nothing (one machine may have endless IPv6 addresses).
func TestHostTimesBounded(t *testing.T) {
	m := bareMaster(MasterConfig{DeadlineFactor: 4, DeadlineFloor: time.Second, FirstDeadline: 30 * time.Second, TaskTimeout: 10 * time.Minute})
	for i := range maxNamesKept + 100 {
		m.measured(&mworker{id: sched.WorkerID(i + 1), host: fmt.Sprintf("2001:db8::%x", i)}, time.Second)
	}
	if n := len(m.hosts.by); n != maxNamesKept {
		t.Errorf("%d hosts kept, want maxNamesKept (%d)", n, maxNamesKept)
	}
	if g := m.hosts.grid(); g != float64(time.Second) {
		t.Errorf("hosts' time %v, want 1 s", time.Duration(g))
	}
}
