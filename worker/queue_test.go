package worker

import (
	"reflect"
	"testing"

	"github.com/esgrid/esgrid/grid"
)

func held(gen, id int32) heldTask { return heldTask{gen: gen, task: grid.Task{ID: id}} }

func popAll(q *remoteQueue) []taskKey {
	var out []taskKey
	for {
		h, ok := q.Pop()
		if !ok {
			return out
		}
		out = append(out, h.key())
	}
}

func TestRemoteQueue(t *testing.T) {
	cases := []struct {
		name    string
		push    []heldTask
		remove  []taskKey
		removed []bool
		want    []taskKey // pop order afterwards
	}{
		{"fifo", []heldTask{held(1, 5), held(1, 2), held(1, 9)}, nil, nil,
			[]taskKey{{1, 5}, {1, 2}, {1, 9}}},
		{"remove middle, head and tail", []heldTask{held(1, 0), held(1, 1), held(1, 2), held(1, 3)},
			[]taskKey{{1, 1}, {1, 0}, {1, 3}}, []bool{true, true, true},
			[]taskKey{{1, 2}}},
		{"remove absent or of another generation", []heldTask{held(1, 0), held(2, 0)},
			[]taskKey{{1, 7}, {3, 0}}, []bool{false, false},
			[]taskKey{{1, 0}, {2, 0}}},
		{"same id in two generations are two tasks", []heldTask{held(1, 4), held(2, 4)},
			[]taskKey{{1, 4}}, []bool{true},
			[]taskKey{{2, 4}}},
		{"duplicate push ignored", []heldTask{held(1, 4), held(1, 5), held(1, 4)}, nil, nil,
			[]taskKey{{1, 4}, {1, 5}}},
		{"remove twice", []heldTask{held(1, 4)}, []taskKey{{1, 4}, {1, 4}}, []bool{true, false}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := newRemoteQueue()
			for _, h := range c.push {
				q.Push(h)
			}
			for i, k := range c.remove {
				if got := q.Remove(k); got != c.removed[i] {
					t.Errorf("Remove(%v) = %v, want %v", k, got, c.removed[i])
				}
			}
			if q.Len() != len(c.want) {
				t.Errorf("Len = %d, want %d", q.Len(), len(c.want))
			}
			if got := popAll(q); !reflect.DeepEqual(got, c.want) {
				t.Errorf("pop order %v, want %v", got, c.want)
			}
			if q.Len() != 0 {
				t.Errorf("Len after popping all = %d", q.Len())
			}
		})
	}
}

func TestRemoteQueueRemoveIf(t *testing.T) {
	q := newRemoteQueue()
	for _, h := range []heldTask{held(1, 0), held(2, 0), held(1, 1), held(2, 1)} {
		q.Push(h)
	}
	gone := q.RemoveIf(func(h heldTask) bool { return h.gen < 2 })
	if len(gone) != 2 || gone[0].key() != (taskKey{1, 0}) || gone[1].key() != (taskKey{1, 1}) {
		t.Errorf("removed %v", gone)
	}
	if q.Has(taskKey{1, 0}) || !q.Has(taskKey{2, 1}) {
		t.Error("Has disagrees with RemoveIf")
	}
	if got := popAll(q); !reflect.DeepEqual(got, []taskKey{{2, 0}, {2, 1}}) {
		t.Errorf("left %v", got)
	}
}
