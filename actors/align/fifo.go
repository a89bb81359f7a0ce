package align

// fifo is one input's alignment buffer: a queue that reuses its backing
// array once drained.
type fifo[M any] struct {
	items []Event[M]
	head  int
}

func (q *fifo[M]) len() int { return len(q.items) - q.head }

func (q *fifo[M]) push(ev Event[M]) {
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Compact instead of growing: slide the live items down.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items = q.items[:n]
		q.head = 0
	}
	q.items = append(q.items, ev)
}

func (q *fifo[M]) pop() Event[M] {
	ev := q.items[q.head]
	q.items[q.head] = Event[M]{} // drop the reference to Data
	q.head++
	if q.head == len(q.items) {
		q.items = q.items[:0]
		q.head = 0
	}
	return ev
}
