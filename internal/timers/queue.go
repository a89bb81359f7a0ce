package timers

import "cmp"

// Timer is one pending timer: its key, when it is due, and its key's key
// group.
type Timer[K cmp.Ordered] struct {
	Key   K
	Time  int64
	Group int
}

// id is what makes a timer unique in its queue.
type id[K cmp.Ordered] struct {
	key K
	t   int64
}

// entry is one timer in the heap; slot is its number in Queue.pos.
type entry[K cmp.Ordered] struct {
	t     int64
	key   K
	group int32
	slot  int32
}

// Queue is a set of timers ordered by (Time, Key). The zero value is an
// empty queue.
//
// The heap is 4-ary and holds the timers themselves, so that sifting reads
// contiguous memory; pos maps a timer's slot, which the index holds and
// which never moves, to its place in the heap.
type Queue[K cmp.Ordered] struct {
	heap  []entry[K]
	pos   []int32 // slot -> heap position; -1 when free
	free  []int32 // free slots
	index map[id[K]]int32
}

// Len is the number of pending timers.
func (q *Queue[K]) Len() int { return len(q.heap) }

// Add registers a timer for key at time t, in key group group. It reports
// false, and changes nothing, when that timer is already pending.
func (q *Queue[K]) Add(group int, key K, t int64) bool {
	if q.index == nil {
		q.index = make(map[id[K]]int32)
	}
	k := id[K]{key, t}
	if _, ok := q.index[k]; ok {
		return false
	}
	var s int32
	if n := len(q.free); n > 0 {
		s = q.free[n-1]
		q.free = q.free[:n-1]
	} else {
		s = int32(len(q.pos))
		q.pos = append(q.pos, 0)
	}
	q.index[k] = s
	q.heap = append(q.heap, entry[K]{t: t, key: key, group: int32(group), slot: s})
	q.pos[s] = int32(len(q.heap) - 1)
	q.up(len(q.heap) - 1)
	return true
}

// Has reports whether the timer for key at time t is pending.
func (q *Queue[K]) Has(key K, t int64) bool {
	_, ok := q.index[id[K]{key, t}]
	return ok
}

// Delete removes the timer for key at time t. It reports false when no
// such timer is pending.
func (q *Queue[K]) Delete(key K, t int64) bool {
	s, ok := q.index[id[K]{key, t}]
	if !ok {
		return false
	}
	q.removeAt(int(q.pos[s]))
	return true
}

// Peek returns the first timer, the one due soonest, without removing it.
func (q *Queue[K]) Peek() (Timer[K], bool) {
	if len(q.heap) == 0 {
		return Timer[K]{}, false
	}
	e := &q.heap[0]
	return Timer[K]{Key: e.key, Time: e.t, Group: int(e.group)}, true
}

// PopDue removes and returns the first timer if it is due at now (its
// time is at most now).
func (q *Queue[K]) PopDue(now int64) (Timer[K], bool) {
	if len(q.heap) == 0 || q.heap[0].t > now {
		return Timer[K]{}, false
	}
	e := &q.heap[0]
	tm := Timer[K]{Key: e.key, Time: e.t, Group: int(e.group)}
	q.removeAt(0)
	return tm, true
}

// Each calls fn for every pending timer of the key groups whose bit is set
// in groups (key group g is bit g%64 of word g/64), or for every timer
// when groups is nil, in no particular order. fn must not change the
// queue.
func (q *Queue[K]) Each(groups []uint64, fn func(Timer[K])) {
	for i := range q.heap {
		e := &q.heap[i]
		if groups != nil {
			g := int(e.group)
			if g/64 >= len(groups) || groups[g/64]&(1<<(g%64)) == 0 {
				continue
			}
		}
		fn(Timer[K]{Key: e.key, Time: e.t, Group: int(e.group)})
	}
}

// At is the i-th pending timer in the queue's own order (0 <= i < Len):
// a way to walk every timer without a call per timer, for snapshots. The
// order changes with every Add, Delete and PopDue.
func (q *Queue[K]) At(i int) Timer[K] {
	e := &q.heap[i]
	return Timer[K]{Key: e.key, Time: e.t, Group: int(e.group)}
}

// Clear removes every timer, keeping the memory for reuse.
func (q *Queue[K]) Clear() {
	clear(q.heap)
	q.heap, q.pos, q.free = q.heap[:0], q.pos[:0], q.free[:0]
	clear(q.index)
}

// removeAt takes the timer at heap position i out of the heap and the
// index.
func (q *Queue[K]) removeAt(i int) {
	e := q.heap[i]
	delete(q.index, id[K]{e.key, e.t})
	q.pos[e.slot] = -1
	q.free = append(q.free, e.slot)
	last := len(q.heap) - 1
	if i != last {
		q.heap[i] = q.heap[last]
		q.pos[q.heap[i].slot] = int32(i)
	}
	q.heap[last] = entry[K]{} // drop the key's memory (a string key)
	q.heap = q.heap[:last]
	if i != last && !q.down(i) {
		q.up(i)
	}
}

func less[K cmp.Ordered](a, b *entry[K]) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.key < b.key
}

// up moves the entry at i towards the root until its parent is not after
// it.
func (q *Queue[K]) up(i int) {
	e := q.heap[i]
	for i > 0 {
		p := (i - 1) / 4
		if !less(&e, &q.heap[p]) {
			break
		}
		q.heap[i] = q.heap[p]
		q.pos[q.heap[i].slot] = int32(i)
		i = p
	}
	q.heap[i] = e
	q.pos[e.slot] = int32(i)
}

// down moves the entry at i away from the root until no child is before
// it, and reports whether it moved.
func (q *Queue[K]) down(i int) bool {
	start, n := i, len(q.heap)
	e := q.heap[i]
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if less(&q.heap[j], &q.heap[m]) {
				m = j
			}
		}
		if !less(&q.heap[m], &e) {
			break
		}
		q.heap[i] = q.heap[m]
		q.pos[q.heap[i].slot] = int32(i)
		i = m
	}
	q.heap[i] = e
	q.pos[e.slot] = int32(i)
	return i > start
}
