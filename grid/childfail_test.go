package grid

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// TestChildTaskFailureFailsTheRun: a task lent to a child master that
// fails there on every try (a plugin with a bug on that x) fails the
// root's batch, naming the task and the failures at the child, under the
// root's -max-retries. Before, the child's batch failed where no one
// read it: the child sat on the task until the root cut it off as
// stalled, took the task back with no failure counted, and lent it
// again at the next split, or hung with no worker of its own; and the
// child allowed the default 3 retries, whatever the root's.
func TestChildTaskFailureFailsTheRun(t *testing.T) {
	t.Run("max retries 0", func(t *testing.T) { childTaskFailure(t, -1, 0, -1) })
	t.Run("max retries 2", func(t *testing.T) { childTaskFailure(t, 2, 2, 3*time.Minute) })
}

// childTaskFailure is TestChildTaskFailureFailsTheRun with the root's
// MasterConfig.MaxRetries cfg, which means want retries, and its
// TaskTimeout timeout.
func childTaskFailure(t *testing.T, cfg, want int, timeout time.Duration) {
	leaktest.Check(t)
	key := splitTestKey(t)
	spec := ProblemSpec{Name: "sphere", Dim: 2}
	// Bounds a hang only; the batch fails as soon as the failures come.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	log := quietConfig().Logger
	root, err := NewMaster(ctx, MasterConfig{Listen: "127.0.0.1:0", Key: key, Problem: spec, Logger: log, MaxRetries: cfg, TaskTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	evalDone := make(chan error, 1)
	go func() {
		_, err := root.Evaluate(ctx, 1, [][]float64{{1, 2}})
		evalDone <- err
	}()
	// The root lends its one task to c, as a split would.
	var pr *Promote
	if !waitLoop(ctx, root, func() bool {
		b := root.cur
		if b == nil {
			return false
		}
		c, tasks := lendToChild(root, b, 1)
		pr = root.promote(c, b, tasks, nil)
		return true
	}) || len(pr.Tasks) != 1 {
		t.Fatal("the root did not lend its task to c")
	}
	started := make(chan *Master, 1)
	childStarted = func(m *Master) { started <- m }
	t.Cleanup(func() { childStarted = nil })
	childDone := make(chan error, 1)
	go func() {
		childDone <- RunChild(ctx, ChildConfig{Promote: pr, Parent: root.Addr(), Listen: "127.0.0.1:0", Key: key, Name: "c", Problem: spec},
			MasterConfig{Logger: log})
	}()
	var c *Master
	select {
	case c = <-started:
	case <-ctx.Done():
		t.Fatal("no child master started")
	}
	// The child counts failures, and times tasks, as the root does.
	var retries int
	var childTimeout time.Duration
	c.ask(func() { retries, childTimeout = c.cfg.MaxRetries, c.cfg.TaskTimeout })
	if retries != want || childTimeout != root.cfg.TaskTimeout {
		t.Errorf("the child master allows %d retries and a task timeout of %v, the root %d and %v", retries, childTimeout, want, root.cfg.TaskTimeout)
	}
	// Its one worker fails the task at every try.
	w := newTestWorker("w", 1, 0)
	w.failTask = 0
	if err := w.start(t, c.Addr(), key); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-evalDone:
	case <-ctx.Done():
		t.Fatal("the root's batch did not end: the child's failed task never reached it")
	}
	var rx *RetriesExhaustedError
	if !errors.As(err, &rx) || rx.Task != 0 || rx.MaxRetries != want || len(rx.Failures) != want+1 {
		t.Fatalf("the root's batch ended with %v, want task 0 failed %d times (max retries %d)", err, want+1, want)
	}
	for _, f := range rx.Failures {
		if f.Worker != "w" || f.Err != "boom" {
			t.Errorf("failure %+v, want w's boom", f)
		}
	}
	root.Close()
	if err := <-childDone; err == nil {
		t.Error("the child master returned nil from a failed run")
	}
}

// TestChildFailureCountsAsTheRootsOwn: a child's word that a task
// failed fails the root's batch only for a task lent to that child, and
// only once the failures it names, added to the root's, pass the root's
// retries; those beyond are not kept. A key holder playing a child fails
// no more than a worker could.
func TestChildFailureCountsAsTheRootsOwn(t *testing.T) {
	leaktest.Check(t)
	key := splitTestKey(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	root, err := NewMaster(ctx, MasterConfig{Listen: "127.0.0.1:0", Key: key, Problem: ProblemSpec{Name: "sphere", Dim: 2},
		Logger: quietConfig().Logger, MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	evalDone := make(chan error, 1)
	go func() {
		_, err := root.Evaluate(ctx, 1, [][]float64{{1, 2}, {3, 4}})
		evalDone <- err
	}()
	var gen int32
	if !waitLoop(ctx, root, func() bool {
		b := root.cur
		if b == nil {
			return false
		}
		gen = b.id
		p := root.proto()
		c := &childMaster{token: 1, name: "c", batch: b.id, created: root.now(), progress: root.now(), masters: 1, inR: true}
		for _, tk := range root.takeTasks(2) {
			if tk.ID == 0 {
				p.lent[tk.ID] = c
				c.lent++
			} else {
				root.addTasks([]Task{tk}) // task 1 stays here
			}
		}
		p.children[c.token] = c
		p.order = append(p.order, c)
		return true
	}) {
		t.Fatal("the root did not lend task 0 to c")
	}
	link, in := silentChildLink(ctx, t, root, key, "c", 1)
	go func() {
		// c passes the end of the run on, as a child does, lest the
		// root's Close wait for its word.
		if awaitFrame(ctx, link, in, isShutdown) != nil {
			link.Send(&Shutdown{})
		}
	}()
	fail := func(id int32, errs ...string) {
		f := &ChildFailed{ID: id}
		for _, e := range errs {
			f.Failures = append(f.Failures, TaskFailure{Worker: "cw", Err: e})
		}
		link.Send(&ChildResults{Gen: gen, Masters: 1, Failed: f})
	}
	fail(1, "not lent", "not lent", "not lent") // not c's task
	fail(0, "first")                            // 1 failure of the 3 that fail it
	fail(0, "second", "third", "beyond")
	select {
	case err = <-evalDone:
	case <-ctx.Done():
		t.Fatal("the root's batch did not end")
	}
	var rx *RetriesExhaustedError
	if !errors.As(err, &rx) || rx.Task != 0 || len(rx.Failures) != 3 ||
		rx.Failures[0].Err != "first" || rx.Failures[1].Err != "second" || rx.Failures[2].Err != "third" {
		t.Fatalf("the root's batch ended with %v, want task 0 failed first, second and third", err)
	}
}
