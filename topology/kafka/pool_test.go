package kafka

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// poolRun drives an idPool as the runtime drives a sink task: a barrier
// pre-commits the open transaction and takes the next slot, a completion
// commits every transaction pre-committed up to it, in order.
type poolRun struct {
	t         *testing.T
	pool      *idPool
	open      int
	pending   []pendingTxn        // pre-committed, not committed, by checkpoint
	snapshots map[uint64][]int    // checkpoint -> slots its snapshot lists as pending
	next      uint64              // the next barrier's checkpoint id
	newest    uint64              // the newest completed checkpoint
	base      uint64              // the newest completed checkpoint, or the last barrier before a restore
	completed map[uint64]struct{} // completed checkpoints
}

type pendingTxn struct {
	checkpoint uint64
	slot       int
}

func newPoolRun(t *testing.T, size int) *poolRun {
	r := &poolRun{t: t, pool: newIDPool(size), snapshots: map[uint64][]int{}, next: 1, completed: map[uint64]struct{}{}}
	i, err := r.pool.take()
	if err != nil {
		t.Fatal(err)
	}
	r.open = i
	return r
}

// barrier reports whether the next transaction found a slot.
func (r *poolRun) barrier() error {
	k := r.next
	r.next++
	r.pool.preCommit(r.open)
	r.pending = append(r.pending, pendingTxn{k, r.open})
	var listed []int
	for _, p := range r.pending {
		listed = append(listed, p.slot)
	}
	r.snapshots[k] = listed
	i, err := r.pool.take()
	if err != nil {
		return err
	}
	// The slot's id gets a new epoch now: no checkpoint that a restore
	// may still pick (the newest completed one or any later) may list it.
	for c, slots := range r.snapshots {
		if c < r.newest {
			continue
		}
		for _, s := range slots {
			if s == i && c != k {
				r.t.Fatalf("slot %d handed out at barrier %d while checkpoint %d (newest completed %d) lists it as pending", i, k, c, r.newest)
			}
		}
	}
	for _, s := range r.snapshots[k] {
		if s == i {
			r.t.Fatalf("slot %d handed out at barrier %d, whose own snapshot lists it", i, k)
		}
	}
	r.open = i
	return nil
}

func (r *poolRun) complete(k uint64) {
	r.completed[k] = struct{}{}
	r.newest = max(r.newest, k)
	r.base = max(r.base, k)
	for len(r.pending) > 0 && r.pending[0].checkpoint <= k {
		r.pool.commit(r.pending[0].slot)
		r.pending = r.pending[1:]
	}
}

// restartPool is the sink after a restore of r's newest completed
// checkpoint: the restore commits what it lists and fences the other ids.
func restartPool(t *testing.T, r *poolRun) *poolRun {
	n := newPoolRun(t, len(r.pool.slots))
	n.pool = newIDPool(len(r.pool.slots))
	for _, s := range r.snapshots[r.newest] {
		n.pool.restored(s)
	}
	i, err := n.pool.take()
	if err != nil {
		t.Fatalf("after a restore: %v", err)
	}
	n.open = i
	n.next = r.next
	n.newest = r.newest
	n.base = r.next - 1
	// Only checkpoints from the newest completed one on may be restored.
	n.snapshots[r.newest] = r.snapshots[r.newest]
	return n
}

// TestIDPoolSteadyState: with every checkpoint completing before the next
// barrier, three ids serve any number of checkpoints.
func TestIDPoolSteadyState(t *testing.T) {
	r := newPoolRun(t, minPoolSize)
	used := map[int]int{}
	for range 1000 {
		k := r.next
		if err := r.barrier(); err != nil {
			t.Fatalf("barrier %d: %v", k, err)
		}
		used[r.open]++
		r.complete(k)
	}
	if len(used) != minPoolSize {
		t.Fatalf("slots used %v, want each of %d", used, minPoolSize)
	}
}

// TestIDPoolExhausted: each checkpoint in a row that does not complete
// holds one more id, and a pool with none free says so.
func TestIDPoolExhausted(t *testing.T) {
	const size = 5
	r := newPoolRun(t, size)
	if err := r.barrier(); err != nil {
		t.Fatal(err)
	}
	r.complete(1)
	// Slots now: 1 committed (listed by nothing newer, but checkpoint 1 is
	// the newest completed and lists it), 1 open. Barriers that never
	// complete take the remaining three.
	var err error
	var n int
	for n = 0; n < size; n++ {
		if err = r.barrier(); err != nil {
			break
		}
	}
	if err == nil || n != size-2 {
		t.Fatalf("after %d barriers without completion: %v; want the pool of %d exhausted after %d", n, err, size, size-2)
	}
	for _, w := range []string{"all 5 transactional ids are in use", "4 by transactions open or waiting", "1 by committed", "SinkConfig.PoolSize"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v\ndoes not say %q", err, w)
		}
	}
	// A completion frees them again.
	r.complete(r.next - 1)
	if err := r.barrier(); err != nil {
		t.Fatalf("after a completion: %v", err)
	}
}

// TestIDPoolRandomSchedules: barriers, in-order completions, skipped
// (aborted) checkpoints and late completions in random order never hand
// out an id that a restorable checkpoint lists, and the pool runs dry
// exactly when every id is needed: by the transactions the newest completed
// checkpoint lists, and one for each barrier since (or since the restore).
func TestIDPoolRandomSchedules(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 11))
		size := minPoolSize + rng.IntN(6)
		r := newPoolRun(t, size)
		var uncompleted []uint64 // barriers whose checkpoint may still complete
		for range 400 {
			switch x := rng.IntN(10); {
			case x < 4 || len(uncompleted) == 0:
				k := r.next
				needed := len(r.snapshots[r.newest]) + int(k-r.base)
				err := r.barrier()
				if (err != nil) != (needed >= size) {
					t.Fatalf("seed %d size %d: barrier %d, newest completed %d listing %d, %d ids needed: %v",
						seed, size, k, r.newest, len(r.snapshots[r.newest]), needed, err)
				}
				if err != nil {
					// The task fails; the sink restarts from the newest
					// completed checkpoint.
					r = restartPool(t, r)
					uncompleted = nil
					continue
				}
				uncompleted = append(uncompleted, k)
			case x < 8:
				// The oldest uncompleted completes; any before it aborted.
				i := rng.IntN(min(len(uncompleted), 2))
				r.complete(uncompleted[i])
				uncompleted = uncompleted[i+1:]
			default:
				uncompleted = uncompleted[1:] // aborted
			}
		}
	}
}
