package dataflow

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/messages"
)

// iterRec is a record of the iteration tests and benchmark: what the
// process function does to the map of Key.
type iterRec struct {
	Key, UK, V int64
	Op         int
	Seq        int64
}

const (
	itPutRange   = iota // m.Put(UK, V), then range over m
	itDelRange          // m.Delete(UK), then range
	itLen               // m.Put(UK, V) (V < 0: m.Delete(UK)), then m.Len()
	itStop              // range, stopping after V entries
	itPutDuring         // range, doubling every value but UK's, and m.Put(UK, V) at the first entry
	itDelDuring         // range, deleting the entries of odd value
	itGet               // m.Get(UK)
	itRefs              // r: change every value in place through All, and UK's through Get (Put when absent)
	itWriteAhead        // range, adding 1000 to every other entry at the first; then to the first
	itDelAhead          // range, deleting every other entry at the first; then Put them back
	itOps
)

// iterOut is what a record of the iteration tests emits: a count, a sum,
// and the user keys in the order the range met them.
type iterOut struct {
	Seq int64
	N   int
	Sum int64
	UKs []int64
}

// iterStates are the states of one instance of iterGraph.
type iterStates struct {
	m *MapState[int64, int64, int64]
	r *MapState[int64, int64, []int64] // reaches a reference: All writes back
}

// iterGraph is a keyed Process operator "p" applying iterRecs; each new
// instance's states go to *reg.
func iterGraph(reg *iterStates) *Plan {
	g := New("iter")
	k := KeyBy(FromSlice(g, "src", []iterRec{}), func(r iterRec) int64 { return r.Key })
	out := Process(k, "p", func(s *KeyedSetup[int64]) ProcessFunc[int64, iterRec, iterOut] {
		m, r := MapOf[int64, int64](s, "m"), MapOf[int64, []int64](s, "r")
		*reg = iterStates{m, r}
		return func(_ *Context[int64], in iterRec, c *Collector[iterOut]) error {
			o := iterOut{Seq: in.Seq}
			rangeM := func() {
				for uk, v := range m.All {
					o.N++
					o.Sum += v
					o.UKs = append(o.UKs, uk)
				}
			}
			switch in.Op {
			case itPutRange:
				m.Put(in.UK, in.V)
				rangeM()
			case itDelRange:
				m.Delete(in.UK)
				rangeM()
			case itLen:
				if in.V < 0 {
					m.Delete(in.UK)
				} else {
					m.Put(in.UK, in.V)
				}
				o.N = m.Len()
			case itStop:
				for uk := range m.All {
					if o.N == int(in.V) {
						break
					}
					o.N++
					o.UKs = append(o.UKs, uk)
				}
			case itPutDuring:
				first := true
				for uk, v := range m.All {
					if first {
						m.Put(in.UK, in.V)
						first = false
					}
					if uk != in.UK {
						m.Put(uk, 2*v)
					}
				}
				o.N = m.Len()
				for _, v := range m.All {
					o.Sum += v
				}
			case itDelDuring:
				for uk, v := range m.All {
					if v%2 != 0 {
						m.Delete(uk)
					}
				}
				rangeM()
			case itGet:
				if v, ok := m.Get(in.UK); ok {
					o.N, o.Sum = 1, v
				}
			case itWriteAhead, itDelAhead:
				before := maps.Collect(m.All)
				first, seen := int64(0), false
				for uk, v := range m.All {
					if !seen {
						first, seen = uk, true
						for k, x := range before {
							switch {
							case k == uk:
							case in.Op == itWriteAhead:
								m.Put(k, x+1000)
							default:
								m.Delete(k)
							}
						}
					}
					o.N++
					o.Sum += v
				}
				for k, x := range before {
					if in.Op == itWriteAhead {
						m.Put(k, x+1000)
					} else if k != first {
						m.Put(k, x)
					}
				}
				if in.Op == itDelAhead {
					o.Sum = 0 // the first entry's, which the heap picks at random
				}
			case itRefs:
				for _, v := range r.All {
					v[0]++
				}
				if v, ok := r.Get(in.UK); ok {
					v[0] += in.V
				} else {
					r.Put(in.UK, []int64{in.V})
				}
				for uk, v := range r.All {
					o.N++
					o.Sum += v[0]
					o.UKs = append(o.UKs, uk)
				}
			}
			c.Emit(o)
			return nil
		}
	})
	Sink(out, "sink", discard[iterOut])
	p, err := NewPlan(g)
	if err != nil {
		panic(err)
	}
	return p
}

// iterModel applies iterRecs to plain Go maps, as the operator should,
// and returns what each record emits, its user keys sorted.
type iterModel struct {
	m map[int64]map[int64]int64
	r map[int64]map[int64]int64 // the one element of each []int64
}

func newIterModel() *iterModel {
	return &iterModel{m: map[int64]map[int64]int64{}, r: map[int64]map[int64]int64{}}
}

func inner(m map[int64]map[int64]int64, k int64) map[int64]int64 {
	if m[k] == nil {
		m[k] = map[int64]int64{}
	}
	return m[k]
}

func (md *iterModel) apply(in iterRec) iterOut {
	o := iterOut{Seq: in.Seq}
	m := inner(md.m, in.Key)
	sumAll := func(m map[int64]int64) {
		for uk, v := range m {
			o.N++
			o.Sum += v
			o.UKs = append(o.UKs, uk)
		}
	}
	switch in.Op {
	case itPutRange:
		m[in.UK] = in.V
		sumAll(m)
	case itDelRange:
		delete(m, in.UK)
		sumAll(m)
	case itLen:
		if in.V < 0 {
			delete(m, in.UK)
		} else {
			m[in.UK] = in.V
		}
		o.N = len(m)
	case itStop:
		o.N = min(int(in.V), len(m))
	case itPutDuring:
		if len(m) > 0 {
			for uk := range m {
				if uk != in.UK {
					m[uk] *= 2
				}
			}
			m[in.UK] = in.V
		}
		o.N = len(m)
		for _, v := range m {
			o.Sum += v
		}
	case itDelDuring:
		for uk, v := range m {
			if v%2 != 0 {
				delete(m, uk)
			}
		}
		sumAll(m)
	case itGet:
		if v, ok := m[in.UK]; ok {
			o.N, o.Sum = 1, v
		}
	case itWriteAhead:
		for uk, v := range m {
			o.Sum += v
			m[uk] = v + 1000
		}
		o.N = len(m)
		if o.N > 0 {
			o.Sum += 1000 * int64(o.N-1)
		}
	case itDelAhead:
		o.N = min(1, len(m))
	case itRefs:
		r := inner(md.r, in.Key)
		for uk := range r {
			r[uk]++
		}
		r[in.UK] += in.V
		sumAll(r)
	}
	slices.Sort(o.UKs)
	if in.Op == itStop {
		o.UKs = nil
	}
	return o
}

// iterRecords are n random records over a few keys and user keys, some
// negative (their bytes sort after the positive ones').
func iterRecords(rng *rand.Rand, n int) []iterRec {
	rs := make([]iterRec, n)
	for i := range rs {
		op := rng.IntN(itOps + 3)
		if op >= itOps {
			op = itPutRange // a third more Puts, so that maps grow
		}
		v := rng.Int64N(100)
		switch op {
		case itLen:
			v -= 30
		case itStop:
			v = rng.Int64N(6)
		}
		rs[i] = iterRec{Key: rng.Int64N(7), UK: rng.Int64N(24) - 6, V: v, Op: op, Seq: int64(i)}
	}
	return rs
}

// newIterInstance is a new instance of task p#0 on the heap (cfg nil) or
// on disk, closed when t ends.
func newIterInstance(t testing.TB, p *Plan, cfg *diskstate.Config, s Sender) Instance {
	t.Helper()
	inst, err := p.NewInstance(mustTask(t, p, "p#0").Index, InstanceContext{BatchSize: 16, Sender: s, DiskState: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := inst.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return inst
}

// diskOrdered reports whether uks are in the order of their stored bytes
// (big-endian: a negative number after the positive ones).
func diskOrdered(uks []int64) bool {
	return slices.IsSortedFunc(uks, func(a, b int64) int {
		return cmpUint(uint64(a), uint64(b))
	})
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkIterOuts checks what one backend emitted against the model's
// outputs; on disk, every range met the user keys in their stored order,
// and a range stopped early met the smallest.
func checkIterOuts(t *testing.T, backend string, rs []iterRec, got, want []iterOut) []iterOut {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records emitted, want %d", backend, len(got), len(want))
	}
	norm := make([]iterOut, len(got))
	for i, o := range got {
		if backend == "disk" && !diskOrdered(o.UKs) {
			t.Fatalf("%s: record %d (%+v): the range met the user keys %v, not in their stored order", backend, i, rs[i], o.UKs)
		}
		if rs[i].Op == itStop {
			if len(o.UKs) != o.N || len(slices.Compact(slices.Sorted(slices.Values(o.UKs)))) != o.N {
				t.Fatalf("%s: record %d (%+v): the range met %v for %d entries", backend, i, rs[i], o.UKs, o.N)
			}
			o.UKs = nil
		}
		o.UKs = slices.Sorted(slices.Values(o.UKs))
		if o.UKs == nil {
			o.UKs = []int64{}
		}
		w := want[i]
		if w.UKs == nil {
			w.UKs = []int64{}
		}
		if o.Seq != w.Seq || o.N != w.N || o.Sum != w.Sum || !slices.Equal(o.UKs, w.UKs) {
			t.Fatalf("%s: record %d (%+v) emitted %+v, want %+v", backend, i, rs[i], o, w)
		}
		norm[i] = o
	}
	return norm
}

// TestMapIterationOnBothBackends runs random Puts, Deletes, ranges (also
// stopped early, and writing during the range), Lens and Gets over a few
// keys' maps on the heap and on disk, in input batches of random sizes,
// with a checkpoint pending (its writes held) for part of the run, and
// with the disk's copies of stored entries kept within the default budget
// or one of 300 bytes (a few entries: copies are refused and evicted). Every
// record's output on each backend equals a model's in plain Go maps, the
// disk's ranges meet the user keys in their stored order, the maps end
// equal to the model's, and the checkpoint restores the maps as they were
// when it began.
func TestMapIterationOnBothBackends(t *testing.T) {
	for _, c := range []struct {
		seed   uint64
		budget int
	}{{1, cacheBudget}, {2, cacheBudget}, {3, cacheBudget}, {4, 300}, {5, 300}} {
		seed := c.seed
		t.Run(fmt.Sprintf("seed=%d,budget=%d", seed, c.budget), func(t *testing.T) {
			defer func(b int) { cacheBudget = b }(cacheBudget)
			cacheBudget = c.budget
			rng := rand.New(rand.NewPCG(seed, 45))
			rs := iterRecords(rng, 3000)
			md := newIterModel()
			want := make([]iterOut, len(rs))
			for i, r := range rs {
				want[i] = md.apply(r)
			}
			// A checkpoint begins at the first batch from record cpAt on,
			// and is taken at the first from takeAt on.
			const cpAt, takeAt = 1200, 2100
			var sizes []int
			for n := 0; n < len(rs); {
				size := 1 + rng.IntN(40)
				sizes = append(sizes, size)
				n += size
			}
			var outs [2][]iterOut
			for b, backend := range []string{"heap", "disk"} {
				var cfg *diskstate.Config
				if backend == "disk" {
					cfg = &diskstate.Config{Dir: t.TempDir(), CacheBytes: 1 << 20, MemTableBytes: 1 << 20}
				}
				var reg iterStates
				p := iterGraph(&reg)
				f := &fakeSender{}
				inst := newIterInstance(t, p, cfg, f)
				states := reg
				var files *DiskFiles
				var finish func() error
				var st messages.TaskState
				var atCheckpoint map[int64]map[int64]int64
				i := 0
				for _, size := range sizes {
					if i >= cpAt && files == nil && finish == nil {
						var err error
						if cfg != nil {
							files, err = inst.(DiskCheckpointer).SnapshotFiles(&st, nil, true, "1")
							finish = func() error { return files.Take() }
						} else {
							finish, err = inst.(AsyncSnapshotter).SnapshotAsync(&st, nil, true)
						}
						if err != nil {
							t.Fatal(err)
						}
						atCheckpoint = cloneMaps(replay(rs[:i]).m)
					}
					if i >= takeAt && finish != nil {
						if err := finish(); err != nil {
							t.Fatal(err)
						}
						finish = func() error { return nil }
					}
					end := min(i+size, len(rs))
					if err := inst.ProcessBatch(0, rs[i:end], nil); err != nil {
						t.Fatal(err)
					}
					inst.Flush()
					i = end
				}
				outs[b] = checkIterOuts(t, backend, rs, records[iterOut](t, f), want)
				if got := nonEmpty(mapsOf(states.m)); !maps.EqualFunc(got, nonEmpty(md.m), maps.Equal) {
					t.Fatalf("%s: the maps end as %v, want %v", backend, got, nonEmpty(md.m))
				}
				// The checkpoint holds the maps as they were when it began.
				var reg2 iterStates
				p2 := iterGraph(&reg2)
				restored := newIterInstance(t, p2, cfg, noopSender{})
				if err := restored.Restore(wireRoundTrip(t, &st)); err != nil {
					t.Fatal(err)
				}
				if files != nil {
					dir := copyFiles(t, restored, files, "p#0")
					if _, err := restored.(DiskCheckpointer).RestoreFiles(dir, files.Desc, true); err != nil {
						t.Fatal(err)
					}
				}
				if got := nonEmpty(mapsOf(reg2.m)); !maps.EqualFunc(got, nonEmpty(atCheckpoint), maps.Equal) {
					t.Fatalf("%s: the checkpoint restores %v, want the maps when it began, %v", backend, got, nonEmpty(atCheckpoint))
				}
			}
			if !slices.EqualFunc(outs[0], outs[1], func(a, b iterOut) bool {
				return a.Seq == b.Seq && a.N == b.N && a.Sum == b.Sum && slices.Equal(a.UKs, b.UKs)
			}) {
				t.Fatal("the backends emitted different records")
			}
		})
	}
}

// replay is the model after rs.
func replay(rs []iterRec) *iterModel {
	md := newIterModel()
	for _, r := range rs {
		md.apply(r)
	}
	return md
}

func cloneMaps(m map[int64]map[int64]int64) map[int64]map[int64]int64 {
	out := make(map[int64]map[int64]int64, len(m))
	for k, inner := range m {
		out[k] = maps.Clone(inner)
	}
	return out
}

// nonEmpty leaves out the keys whose map is empty.
func nonEmpty[K comparable, UK comparable, V any](m map[K]map[UK]V) map[K]map[UK]V {
	out := map[K]map[UK]V{}
	for k, inner := range m {
		if len(inner) > 0 {
			out[k] = inner
		}
	}
	return out
}

// clickRec is a click of the timer tests: its user, sequence number, and
// the end of its window, where the user's timer fires.
type clickRec struct{ User, Seq, End int64 }

// windowOut is what a timer of the timer tests emits: its user's clicks
// in the window that ends at End, counted and their sequence numbers
// added up.
type windowOut struct{ User, End, N, Sum int64 }

// bufferGraph buffers each user's clicks in a map and, in a timer at the
// end of each click's window (event time, or processing time with proc),
// ranges over the map, emitting the clicks of the windows ended and
// deleting them: during the range in event time, after it in processing
// time.
func bufferGraph(proc bool) *Plan {
	g := New("buffer")
	k := KeyBy(FromSlice(g, "src", []clickRec{}), func(c clickRec) int64 { return c.User })
	out := Process(k, "p", func(s *KeyedSetup[int64]) ProcessFunc[int64, clickRec, windowOut] {
		buf := MapOf[int64, int64](s, "clicks") // sequence number -> window end
		var done []int64
		OnTimer(s, func(ctx *Context[int64], tm Timer, out *Collector[windowOut]) error {
			end := tm.Time.UnixNano()
			o := windowOut{User: ctx.Key(), End: end}
			done = done[:0]
			for seq, e := range buf.All {
				if e > end {
					continue
				}
				o.N++
				o.Sum += seq
				if proc {
					done = append(done, seq)
				} else {
					buf.Delete(seq)
				}
			}
			for _, seq := range done {
				buf.Delete(seq)
			}
			if n := buf.Len(); n != 0 && o.N == 0 {
				return fmt.Errorf("user %d: the timer at %d found nothing, and %d clicks are buffered", ctx.Key(), end, n)
			}
			out.Emit(o)
			return nil
		})
		return func(ctx *Context[int64], c clickRec, _ *Collector[windowOut]) error {
			buf.Put(c.Seq, c.End)
			if proc {
				ctx.RegisterProcessingTimer(time.Unix(0, c.End))
			} else {
				ctx.RegisterEventTimer(time.Unix(0, c.End))
			}
			return nil
		}
	})
	Sink(out, "sink", discard[windowOut])
	p, err := NewPlan(g)
	if err != nil {
		panic(err)
	}
	return p
}

// bufferClicks are n clicks of 13 users, 1 ns apart but up to 40 ns out of
// order, in windows of 100 ns.
func bufferClicks(n int) []clickRec {
	cs := make([]clickRec, n)
	for i := range cs {
		ts := int64(i) + 1000 - int64((i*7919)%41)
		cs[i] = clickRec{User: int64(i*31) % 13, Seq: int64(i), End: (ts/100 + 1) * 100}
	}
	return cs
}

// bufferWant is what the timers should emit: each user's clicks by
// window, sorted.
func bufferWant(cs []clickRec) []windowOut {
	byWin := map[[2]int64]windowOut{}
	for _, c := range cs {
		o := byWin[[2]int64{c.User, c.End}]
		o.User, o.End = c.User, c.End
		o.N++
		o.Sum += c.Seq
		byWin[[2]int64{c.User, c.End}] = o
	}
	return sortedOuts(slices.Collect(maps.Values(byWin)))
}

func sortedOuts(os []windowOut) []windowOut {
	return slices.SortedFunc(slices.Values(os), func(a, b windowOut) int {
		if a.User != b.User {
			return cmpInt(a.User, b.User)
		}
		return cmpInt(a.End, b.End)
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// feedClicks feeds cs[from:] to inst in batches of 32, each followed by
// the time (the watermark, or processing time with proc) 60 ns behind the
// batch's last click, so that no click is late; then the time of the
// end. A checkpoint begins (cp) before the time that follows the batch
// holding click cpAt, and is taken (take) 8 batches later.
func feedClicks(t *testing.T, inst Instance, cs []clickRec, from int, proc bool, cpAt int, cp func(), take func()) {
	t.Helper()
	advance := func(now int64) {
		var err error
		if proc {
			err = inst.(ProcessingTimers).FireProcessingTimers(now)
		} else {
			err = inst.(WatermarkListener).OnWatermark(now)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	takeAt := -1
	for i, b := from, 0; i < len(cs); i, b = i+32, b+1 {
		end := min(i+32, len(cs))
		if err := inst.ProcessBatch(0, cs[i:end], nil); err != nil {
			t.Fatal(err)
		}
		if cp != nil && i <= cpAt && cpAt < end {
			cp()
			takeAt = b + 8
		}
		advance(int64(end-1) + 1000 - 60)
		if b == takeAt {
			take()
		}
		inst.Flush()
	}
	advance(1 << 40)
	inst.Flush()
}

// TestTimerRangesMapOnBothBackends is the buffered-clicks pattern: records
// append to a map, and a timer per key and window ranges over the map and
// deletes what it emits. In event time and in processing time, on the
// heap and on disk, the windows emitted equal those computed in plain Go;
// a checkpoint begun before a burst of timers and taken 8 batches later
// (its writes held meanwhile) restores into an instance that emits, for
// the clicks after it, what the first emitted after it.
func TestTimerRangesMapOnBothBackends(t *testing.T) {
	cs := bufferClicks(6000)
	want := bufferWant(cs)
	const cpAt = 2500
	for _, proc := range []bool{false, true} {
		for _, backend := range []string{"heap", "disk"} {
			t.Run(fmt.Sprintf("proc=%t/%s", proc, backend), func(t *testing.T) {
				var cfg *diskstate.Config
				if backend == "disk" {
					cfg = &diskstate.Config{Dir: t.TempDir(), CacheBytes: 1 << 20, MemTableBytes: 1 << 20}
				}
				p := bufferGraph(proc)
				f := &fakeSender{}
				inst := newIterInstance(t, p, cfg, f)
				var st messages.TaskState
				var files *DiskFiles
				var finish func() error
				from, mark := 0, 0 // the clicks after the checkpoint, and the output then
				cp := func() {
					var err error
					if cfg != nil {
						files, err = inst.(DiskCheckpointer).SnapshotFiles(&st, nil, true, "1")
						finish = files.Take
					} else {
						finish, err = inst.(AsyncSnapshotter).SnapshotAsync(&st, nil, true)
					}
					if err != nil {
						t.Fatal(err)
					}
					inst.Flush()
					mark = len(records[windowOut](t, f))
					from = (cpAt/32 + 1) * 32
				}
				take := func() {
					if err := finish(); err != nil {
						t.Fatal(err)
					}
				}
				feedClicks(t, inst, cs, 0, proc, cpAt, cp, take)
				got := records[windowOut](t, f)
				if g := sortedOuts(got); !slices.Equal(g, want) {
					t.Fatalf("%d windows emitted, want %d; first difference: %v", len(g), len(want), firstDiff(g, want))
				}
				if from == 0 || mark == 0 || mark == len(got) {
					t.Fatalf("the checkpoint began after click %d, with %d of the %d windows emitted: want some before and some after", from, mark, len(got))
				}
				f2 := &fakeSender{}
				restored := newIterInstance(t, p, cfg, f2)
				if err := restored.Restore(wireRoundTrip(t, &st)); err != nil {
					t.Fatal(err)
				}
				if files != nil {
					dir := copyFiles(t, restored, files, "p#0")
					if _, err := restored.(DiskCheckpointer).RestoreFiles(dir, files.Desc, true); err != nil {
						t.Fatal(err)
					}
				}
				feedClicks(t, restored, cs, from, proc, -1, nil, nil)
				after := sortedOuts(records[windowOut](t, f2))
				if wantAfter := sortedOuts(got[mark:]); !slices.Equal(after, wantAfter) {
					t.Fatalf("restored from the checkpoint: %d windows emitted, want the %d emitted after it; first difference: %v",
						len(after), len(wantAfter), firstDiff(after, wantAfter))
				}
			})
		}
	}
}

func firstDiff(a, b []windowOut) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("%+v against %+v", a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}

// TestDiskCopiesFollowOtherWrites: the copies of a key's stored entries
// that iterations keep between batches follow the state's own writes, and
// are dropped when the database changes otherwise: here, a key group
// restored into the running instance adds an entry to a map whose copy
// is kept, and the next Len and range see it.
func TestDiskCopiesFollowOtherWrites(t *testing.T) {
	var reg iterStates
	p := iterGraph(&reg)
	heap := newIterInstance(t, p, nil, noopSender{})
	if err := heap.ProcessBatch(0, []iterRec{{Key: 1, UK: 2, V: 20, Op: itPutRange}}, nil); err != nil {
		t.Fatal(err)
	}
	st := snapshot(t, heap)
	f := &fakeSender{}
	disk := newIterInstance(t, p, &diskstate.Config{Dir: t.TempDir()}, f)
	if err := disk.Restore(&messages.TaskState{StateDescriptors: st.GetStateDescriptors()}); err != nil {
		t.Fatal(err)
	}
	for i, r := range []iterRec{{Key: 1, UK: 1, V: 10, Op: itPutRange}, {Key: 1, UK: 3, V: 30, Op: itPutRange}} {
		if err := disk.ProcessBatch(0, []iterRec{r}, nil); err != nil {
			t.Fatal(err)
		}
		if pm := reg.m.d.pend[1]; pm == nil || !pm.cached {
			t.Fatalf("batch %d: no copy of key 1's entries is kept", i)
		}
	}
	for _, g := range st.GetKeyGroups() {
		if err := disk.(KeyGroupRestorer).RestoreKeyGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	if err := disk.ProcessBatch(0, []iterRec{{Key: 1, UK: 4, V: 40, Op: itLen}, {Key: 1, UK: 5, V: 50, Op: itPutRange}}, nil); err != nil {
		t.Fatal(err)
	}
	disk.Flush()
	got := records[iterOut](t, f)
	want := []iterOut{
		{N: 1, Sum: 10, UKs: []int64{1}}, {N: 2, Sum: 40, UKs: []int64{1, 3}},
		{N: 4}, {N: 5, Sum: 150, UKs: []int64{1, 2, 3, 4, 5}},
	}
	if !slices.EqualFunc(got, want, func(a, b iterOut) bool { return a.N == b.N && a.Sum == b.Sum && slices.Equal(a.UKs, b.UKs) }) {
		t.Fatalf("emitted %+v, want %+v", got, want)
	}
}
