package worker

import (
	"container/list"

	"github.com/esgrid/esgrid/grid"
)

// taskKey names a task instance on this worker: task ids restart at 0 in
// every generation.
type taskKey struct {
	gen, id int32
}

// heldTask is a task waiting in the remote queue.
type heldTask struct {
	gen  int32
	task grid.Task
}

func (h heldTask) key() taskKey { return taskKey{h.gen, h.task.ID} }

// remoteQueue is the worker's remote queue Q_r,k: the tasks the master sent
// that no slot runs yet (held tasks). Slots take them in the order sent;
// the master can take one back by id in O(1) (docs/papers.md §1, R3Q: cancelling
// a held task only removes it from the queue). Not safe for concurrent use.
type remoteQueue struct {
	order list.List // of heldTask, oldest first
	byKey map[taskKey]*list.Element
	bytes float64 // what the held tasks take (taskBytes)
}

func newRemoteQueue() *remoteQueue {
	return &remoteQueue{byKey: make(map[taskKey]*list.Element)}
}

// Len is the number of held tasks.
func (q *remoteQueue) Len() int { return len(q.byKey) }

// Bytes is about the memory the held tasks take.
func (q *remoteQueue) Bytes() float64 { return q.bytes }

// Has reports whether the task is held.
func (q *remoteQueue) Has(k taskKey) bool {
	_, ok := q.byKey[k]
	return ok
}

// Push appends a task. A task already held is not added twice; Push reports
// whether it added.
func (q *remoteQueue) Push(h heldTask) bool {
	if q.Has(h.key()) {
		return false
	}
	q.byKey[h.key()] = q.order.PushBack(h)
	q.bytes += taskBytes(len(h.task.X))
	return true
}

// Pop removes and returns the oldest held task.
func (q *remoteQueue) Pop() (heldTask, bool) {
	e := q.order.Front()
	if e == nil {
		return heldTask{}, false
	}
	h := q.order.Remove(e).(heldTask)
	q.forget(h)
	return h, true
}

// Remove takes a held task out of the queue, reporting whether it was there.
func (q *remoteQueue) Remove(k taskKey) bool {
	e, ok := q.byKey[k]
	if !ok {
		return false
	}
	q.forget(q.order.Remove(e).(heldTask))
	return true
}

// Take removes a held task from the queue and returns it.
func (q *remoteQueue) Take(k taskKey) (heldTask, bool) {
	e, ok := q.byKey[k]
	if !ok {
		return heldTask{}, false
	}
	h := q.order.Remove(e).(heldTask)
	q.forget(h)
	return h, true
}

// RemoveIf removes every held task for which drop is true and returns them
// in queue order.
func (q *remoteQueue) RemoveIf(drop func(heldTask) bool) []heldTask {
	var out []heldTask
	for e := q.order.Front(); e != nil; {
		next := e.Next()
		if h := e.Value.(heldTask); drop(h) {
			q.order.Remove(e)
			q.forget(h)
			out = append(out, h)
		}
		e = next
	}
	return out
}

// forget drops a task taken out of the order from the index and the
// count of bytes.
func (q *remoteQueue) forget(h heldTask) {
	delete(q.byKey, h.key())
	q.bytes -= taskBytes(len(h.task.X))
	if len(q.byKey) == 0 {
		q.bytes = 0 // no drift from rounding
	}
}
